//! A GGUF file's header: the metadata and tensor directory (`gguf::Gguf::open`), then what
//! lector reads from it: the model's hyper-parameters and the byte-level BPE tokenizer.
#![no_main]
use lector_generate::gguf::Gguf;
use lector_generate::model::Config;
use lector_generate::tokenizer::GgufTokenizer;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let path = lector_fuzz::scratch_file("gguf", data);
    let Ok(gguf) = Gguf::open(&path) else {
        return;
    };
    let _ = gguf.name();
    let _ = Config::from_gguf(&gguf);
    if let Ok(tokenizer) = GgufTokenizer::from_gguf(&gguf) {
        let _ = tokenizer.encode("Where is <|im_start|> the Eiffel tower? 123");
    }
});
