"""Reference token ids and greedy continuations of a GGUF model from llama.cpp (llama-cpp-python).

Writes the fixture crates/lector-generate/tests/fixtures/smollm2_reference.json that
crates/lector-generate/tests/parity.rs compares lector's tokenizer (exact ids) and greedy
decoding against. Run with the interpreter tools/setup-llama-cpp.sh prints:

    PY=$(bash tools/setup-llama-cpp.sh | tail -1)
    $PY tools/gguf_tokens_reference.py ~/.cache/lector/models/smollm2-135m-instruct-q4_1/SmolLM2-135M-Instruct.Q4_1.gguf \
        crates/lector-generate/tests/fixtures/smollm2_reference.json
"""

import json
import sys

import llama_cpp

TEXTS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "  leading spaces, trailing spaces   ",
    "tabs\tand\nnewlines\n\n\nand   runs    of     spaces",
    "Numbers: 1234567890, 3.14159, -42, 1e10, 2024-11-30, $1,000,000.",
    "Accents: café, naïve, façade, Zürich, São Paulo, Ångström, résumé.",
    "Ελληνικά, Русский текст, עברית, العربية, हिन्दी.",
    "CJK: 日本語のテキスト、中文文本，한국어 텍스트。",
    "Emoji: 👍🏽 🇫🇷 👨‍👩‍👧‍👦 🤖✨ ☕",
    "fn main() {\n    let x: Vec<u32> = (0..10).map(|i| i * 2).collect();\n    println!(\"{x:?}\");\n}\n",
    "def f(a, b=2, *args, **kw):\n\treturn {'k': [a, b]}  # comment\n",
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "I'm sure they'll say it's John's, we've seen I'd've done it.",
    "URLs: https://example.org/a/b?c=d&e=f#g and emails a.b@c.de",
    "ALL CAPS and MiXeD cAsE and snake_case and camelCase and kebab-case",
    "Zero-width\u200bjoiner and non\u00a0breaking space and soft\u00adhyphen",
    "",
    "\n",
    "a" * 50 + " " + "b" * 7,
    "Super Bowl 50 was an American football game to determine the champion of the National Football League (NFL) for the 2015 season.",
]

PROMPTS = [
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "The Eiffel Tower is located in",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWho wrote Hamlet?<|im_end|>\n<|im_start|>assistant\n",
]


def main() -> None:
    gguf, out = sys.argv[1], sys.argv[2]
    llm = llama_cpp.Llama(model_path=gguf, n_ctx=512, n_threads=2, verbose=False, seed=0)
    tokens = [
        {"text": t, "ids": llm.tokenize(t.encode("utf-8"), add_bos=False, special=True)}
        for t in TEXTS
    ]
    greedy = []
    for prompt in PROMPTS:
        ids = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        llm.reset()
        generated = []
        for token in llm.generate(ids, top_k=1, top_p=1.0, temp=0.0, repeat_penalty=1.0, reset=True):
            if token == llm.token_eos() or len(generated) == 16:
                break
            generated.append(token)
        greedy.append({"prompt": prompt, "prompt_ids": ids, "generated": generated})
    fixture = {
        "generator": "llama.cpp via llama-cpp-python " + llama_cpp.__version__,
        "gguf": gguf.rsplit("/", 1)[-1],
        "tokens": tokens,
        "greedy": greedy,
    }
    with open(out, "w", encoding="utf-8") as f:
        json.dump(fixture, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
