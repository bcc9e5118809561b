//! Prompt-processing and generation speed of lector's GGUF model, measured the way
//! `bench/gen_speed.py` measures llama.cpp: one forward pass over a prompt of P tokens, then G
//! single-token steps feeding back the most likely token (end-of-text ignored, so every run
//! generates exactly G tokens). Threads: `RAYON_NUM_THREADS` (candle's pool).
//!
//! ```text
//! RAYON_NUM_THREADS=2 cargo run --release -p lector-generate --example gen_speed -- MODEL.gguf [P] [G] [REPEATS]
//! ```
//! Prints one JSON line: `{"prompt_tokens", "generated_tokens", "prompt_tokens_per_s", "generated_tokens_per_s"}`
//! (the best of the repeats).

use lector_generate::gguf::Gguf;
use lector_generate::model::Model;
use lector_generate::tokenizer::GgufTokenizer;
use std::time::Instant;

const TEXT: &str = "Super Bowl 50 was an American football game to determine the champion of the National \
Football League (NFL) for the 2015 season. The American Football Conference (AFC) champion Denver Broncos \
defeated the National Football Conference (NFC) champion Carolina Panthers 24-10 to earn their third Super \
Bowl title. ";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .ok_or("usage: gen_speed MODEL.gguf [PROMPT_TOKENS] [GENERATED] [REPEATS]")?;
    let arg = |i: usize, default: usize| args.get(i).map_or(Ok(default), |s| s.parse::<usize>());
    let (prompt_len, generated, repeats) = (arg(2, 256)?, arg(3, 64)?, arg(4, 3)?);
    let gguf = Gguf::open(std::path::Path::new(path))?;
    let tokenizer = GgufTokenizer::from_gguf(&gguf)?;
    let model = Model::load(&gguf)?;
    let mut prompt = tokenizer.encode(&TEXT.repeat(prompt_len / 40 + 1))?;
    prompt.truncate(prompt_len);
    let (mut best_pp, mut best_tg) = (0f64, 0f64);
    for _ in 0..repeats {
        let mut cache = model.cache(1, prompt.len() + generated)?;
        let start = Instant::now();
        let mut logits = model.forward(&[prompt.clone()], &mut cache)?;
        best_pp = best_pp.max(prompt.len() as f64 / start.elapsed().as_secs_f64());
        let start = Instant::now();
        for _ in 0..generated {
            let next = logits.squeeze(0)?.argmax(0)?.to_scalar::<u32>()?;
            logits = model.forward(&[vec![next]], &mut cache)?;
        }
        best_tg = best_tg.max(generated as f64 / start.elapsed().as_secs_f64());
    }
    println!(
        "{{\"prompt_tokens\": {}, \"generated_tokens\": {generated}, \"prompt_tokens_per_s\": {best_pp:.2}, \"generated_tokens_per_s\": {best_tg:.2}}}",
        prompt.len()
    );
    Ok(())
}
