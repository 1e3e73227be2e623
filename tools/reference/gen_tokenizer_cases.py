#!/usr/bin/env python3
"""Golden token ids for the C tokenizer (src/model/tokenizer.c), computed with the official HF tokenizer.

Loads the snapshot tokenizer exactly as MiniMax-H3 does (transformers AutoTokenizer -> Qwen2Tokenizer,
backed by the Rust `tokenizers` library; offline, from tests/fixtures/skeleton/tokenizer) and encodes
every case with add_special_tokens=False (docs/model/text_encoder.md §1.2, §1.8).

    nice python3 tools/reference/gen_tokenizer_cases.py            # writes tests/fixtures/golden/tokenizer/cases.json
    nice python3 tools/reference/gen_tokenizer_cases.py --random 20000 --seed 7 --out /tmp/random_cases.json
        # a large random differential corpus (not committed); check it with
        # build/tests/test_tokenizer /tmp/random_cases.json

Deterministic: every random choice comes from a seeded random.Random.
Also checks the ids stored in tests/fixtures/tokenizer_cases.json against the reference (exit 1 on a mismatch).
"""
import argparse
import json
import os
import random
import sys
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOK_DIR = os.path.join(ROOT, "tests", "fixtures", "skeleton", "tokenizer")
OUT = os.path.join(ROOT, "tests", "fixtures", "golden", "tokenizer", "cases.json")
OLD_CASES = os.path.join(ROOT, "tests", "fixtures", "tokenizer_cases.json")

ADDED = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>",
    "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
    "<tool_response>", "</tool_response>", "<think>", "</think>",
    "<d>", "</d>", "<|cutoff|>", "<|lyrics_start|>", "<|lyrics_end|>", "<|caption_start|>", "<|caption_end|>",
]

# The 25 White_Space code points, plus look-alikes that are NOT \s for the Rust regex (docs/model/text_encoder.md §1.5).
WHITESPACE = ["\t", "\n", "\x0b", "\x0c", "\r", " ", "\x85", "\xa0", "\u1680"] + \
    [chr(c) for c in range(0x2000, 0x200B)] + ["\u2028", "\u2029", "\u202f", "\u205f", "\u3000"]
NOT_WHITESPACE = ["\u180e", "\u200b", "\ufeff", "\u200c", "\u200d", "\u2060"]


def load_tokenizer():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(TOK_DIR, local_files_only=True)
    assert len(tok) == 151676, len(tok)
    for i, s in enumerate(ADDED):
        assert tok.convert_tokens_to_ids(s) == 151643 + i, (s, tok.convert_tokens_to_ids(s))
    return tok


def hand_cases():
    c = []
    # docs/model/text_encoder.md §1.10 reference rows
    c += ["A red fox walking through snow",
          "A red fox trotting through a snowy pine forest, snow crunching underfoot",
          "Hello, WORLD!  2026\n中文 café's", "🙂a!\n", "<|im_start|>",
          "A cinematic close-up of a clockwork bird taking flight.", "e\u0301",
          "I'M HERE, they'RE ok, it'S don't", "x'\u017fy", "new\n\n  line", " \n x", "trail  ", "a \u00a0b",
          "\u0928\u092e\u0938\u094d\u0924\u0947", "$1,234.50", "<Picture 1>: ", "<Picture 2>: ", "<Picture 10>: ",
          "<Video 1>: ", "<Audio 1>: ", "<Audio 2>: ", "<0.2 seconds>", "<2.0 seconds>", "<14.2 seconds>",
          "(S1) says, <d>[English] Hey! Watch your dog!</d> She", "<|im_start|>user\n<think></think>",
          "<cutoff>", ""]
    # mixed scripts
    c += ["一只红狐狸在雪地里奔跑，镜头跟随拍摄。", "東京の夜、ネオンが雨に反射する。カタカナとひらがな",
          "서울의 밤거리에서 비가 내린다. 한국어 문장입니다.",
          "مرحبا بالعالم! هذا نص عربي مع أرقام ١٢٣٤٥ و 678.",
          "नमस्ते दुनिया, यह एक हिंदी वाक्य है। ०१२३",
          "สวัสดีชาวโลก นี่คือภาษาไทย ๑๒๓", "Привет, мир! Это русский текст. ЁЖИК ёжик",
          "Γειά σου Κόσμε! Ελληνικά: αβγδε ΆΈΉ", "שלום עולם! זה טקסט בעברית עם ניקוד: שָׁלוֹם",
          "English 中文 日本語 한국어 العربية हिन्दी ไทย русский ελληνικά עברית mixed",
          "Ελληνικά-русский_中文/日本語\\한국어|हिन्दी", "ქართული ენა Հայերեն լեզու አማርኛ ቋንቋ",
          "ᚠᚢᚦᚨᚱᚲ ᚷᚹ 𐌰𐌱𐌲 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟘𝟙𝟚", "Tiếng Việt có dấu: Đà Nẵng, Huế, Hội An",
          "ཀུན་ལ་བདེ་ལེགས། ພາສາລາວ ភាសាខ្មែរ မြန်မာ", "中文，標點！「引號」『書名』（括號）【方括】……——"]
    # emoji
    c += ["emoji 🦊🌲❄️ and symbols © ® ™ → ∑", "👩‍👩‍👧‍👦 family", "👍🏻👍🏼👍🏽👍🏾👍🏿",
          "🧑🏽‍🚀 astronaut, 👨‍💻 coder, 🏳️‍🌈 flag, 🏴‍☠️ pirate", "🇯🇵🇺🇸🇩🇪 flags", "1️⃣ #️⃣ *️⃣ keycaps",
          "a🙂b🙂c", "🙂🙂🙂🙂🙂🙂🙂🙂", " 🙂 x", "\t🙂hi", "😀😃😄😁😆😅🤣😂🙂🙃", "❤️‍🔥 ❤ ♥️",
          "🫶🏾🫠🪿", "🙂\n\n🙂", "text🙂!", "🙂's", "🏃‍♀️‍➡️ running right"]
    # combining marks / NFC
    c += ["e\u0301te\u0301", "cafe\u0301 re\u0301sume\u0301", "Cafe\u0301\u0301", "a\u0308o\u0308u\u0308",
          "A\u030a \u212b \u00c5 \u2126 \u03a9", "\u1100\u1161\u11a8 \u1112\u1161\u11ab", "x\u0301y",
          "q\u0307\u0323 q\u0323\u0307", "\u0301leading mark", " \u0301 space mark", "\u0915\u093c \u0958",
          "\uff21\uff22\uff23 fullwidth", "\ufb01 ligature \ufb03", "\u00bd \u00b2 \u2167 \u2160\u2161",
          "\u0301", "o\u0302\u0301 \u1ed1", "\u0041\u030a\u0301", "s\u0323\u0307 \u1e69",
          "Ünïcödé café naïve résumé é Å", "\u2000\u2001 compat spaces stay", "Å\u0301", "ḱṷṓn"]
    # whitespace
    c += ["   leading spaces and    runs\t\ttabs\n\n\nnewlines   ", " ", "  ", "\n", "\r\n", "\r\n\r\n",
          "a\r\nb", "a\rb", "a \r\n b", "a\n \n b", "a \n", "a  \n  ", "\t", "\t\t", "\t\tx", " \tx", "\t x",
          "x \t y", "x\t\ty", "end with space ", "end with spaces   ", "end with tab\t", "end\n", "end\n\n\n",
          "  \n\n  \t x", "a\u3000b", "a\u3000\u3000b", "\u3000x", "a\u00a0\u00a0b", "\u00a0x", "x\u00a0",
          "a\u2028b", "a\u2029b", "a\x85b", "a\x0bb\x0cc", "a\u200bb", "a\ufeffb", "a\u180eb",
          "a\u202fb\u205fc\u1680d", "  \u00a0 x", " \u00a0\u00a0 ", "\n\t\n", "\r", "\r\r\n\n", "x\r",
          "line1\nline2\n\nline4\n\n\n", "    indented code\n        more\n"]
    # digits
    c += ["12345678901234567890", "3.14159", "1,000,000", "0x1F", "2026-11-30", "v1.2.3", "a1b2c3",
          "١٢٣٤٥٦٧٨٩٠", "०१२३४५६७८९", "𝟘𝟙𝟚𝟛", "①②③", "100%", "-42", "+1e-9", "99 bottles", "x²+y²=z²",
          "Ⅻ", "１２３４５"]
    # contractions
    for base in ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"]:
        for v in {base, base.upper(), base[:2].upper() + base[2:], base[:2] + base[2:].upper()}:
            c.append("it" + v + " x")
            c.append(v)
            c.append("x" + v + "y")
    c += ["Don't stop! I'll be there -- we're 100% ready; it's 3.14159 o'clock.",
          "I'M HERE, THEY'RE OK, IT'S", "she'd've", "'''", "''s", "'s's", "it\u2019s", "rock 'n' roll",
          "'LLy", "'Ll 'lL", "x'\u017f", "x'\u017fy x'\u017ft", "'\u212a", " 's", "\t's", "\n's", "5's",
          "'re'", "y'all", "ma'am", "o'clock", "l'été", "'sup", "'tis"]
    # punctuation
    c += ["Hello, world!", "What?!?!", "...", "--", "a--b", "(parenthesized)", "[brackets] {braces}",
          "\"quoted\" 'single'", "path/to/file.txt", "C:\\Windows\\System32", "user@example.com",
          "https://example.com/a?b=c&d=e#f", "#hashtag @mention", "a+b=c; d*e/f", "<html><body></body></html>",
          "!!!\n", " !!!\n\n", "?\r\n", "a.\n\nb", "«guillemets» „quotes“", "¿Qué? ¡Sí!", "~`^|\\_",
          "…", "— – -", "•·°", "→←↑↓", "$€£¥₹", "§¶†‡", "x ... y", " .", " . ", "a.b.c"]
    # every added token inline
    for i, s in enumerate(ADDED):
        c.append(s)
        c.append("before " + s + " after")
        c.append("x" + s + "y")
    c += ["".join(ADDED), " ".join(ADDED), "<d><d></d></d>", "<<d>>", "< d>", "<d >", "<D>", "<|cutoff|",
          "|cutoff|>", "<|im_start|><|im_end|>", "<|vision_start|><|image_pad|><|image_pad|><|vision_end|>",
          "<think>\n\n</think>\n\n", "<d>[English] Hello!</d>", "<d>你好</d><d>What?</d>",
          "<d>e\u0301</d>e\u0301", "e<d>\u0301", "<scenetrans>", "<|image_pad", "<|endoftext|><|endoftext|>",
          "<|lyrics_start|>la la<|lyrics_end|>", "<|caption_start|>cap<|caption_end|>", "</d>'s",
          "< |im_start|>", "<tool_call>{\"a\":1}</tool_call>"]
    # controls and odd code points
    c += ["a\x00b", "\x00", "\x01\x02\x03", "\x1c\x1d\x1e\x1f", "\x7f", "\ud7ff", "\ue000 private",
          "\U0010fffd", "\ufffd replacement", "\U0001f600\U0001f600", "\u00ad soft hyphen", "a\u034fb"]
    # long prompts
    guide = ("integrated_multimodal_description: [Shot 1] A cinematic red fox walks through a snowy pine "
             "forest at dawn. The camera tracks beside the fox as its paws leave crisp prints in fresh snow. "
             "(S1) says, <d>[English] Look at the light!</d> overall_soundscape: Soft wind, distant birds. "
             "non_diegetic_music: A quiet orchestral score.\n")
    c.append(guide * 12)
    c.append(("一只红狐狸在雪地里奔跑，镜头跟随拍摄。 The fox runs. 🦊 " * 40).strip())
    c.append(" ".join(str(i) for i in range(600)))
    c.append("word " * 1000)
    c.append("\n".join("line %d: %s" % (i, "x" * (i % 17)) for i in range(300)))
    return c


def random_text(rng, n):
    """Random mixtures that stress the pre-tokenizer: every class boundary the regex cares about."""
    pools = [
        "abcxyzABCXYZ", "stremvldSTREMVLD", "'", "\u2019", "0123456789", " ", "  ", "\t", "\n", "\r\n", "\r",
        ".,!?;:-_()[]{}<>/\\|\"#$%&*+=@^`~", "中文字漢日本語", "ひらがなカタカナ", "한국어", "русскийЁ", "ελληνικά",
        "עברית", "عربي١٢٣", "हिन्दीक़", "ภาษาไทย", "\u0301\u0308\u0323\u0327", "e\u0301", "\u00e9\u00c5\u212b",
        "🙂🦊👍🏽👩‍💻❄️", "\u00a0\u3000\u2003\u2028\u2029\x85\x0b\x0c", "\u200b\ufeff\u180e", "\u017f\u212a",
        "\u00bd\u00b2\u2167\u2460", "\x00\x01\x1f\x7f", "<d>", "</d>", "<|im_start|>", "<think>", "<|cutoff|>",
        "'s", "'LL", "'Re", "\ufb01\ufb06\u1e97\u00df",
    ]
    out = []
    for _ in range(n):
        p = rng.choice(pools)
        if len(p) > 1 and rng.random() < 0.6:
            p = rng.choice(p) if not p.startswith("<") else p
        out.append(p)
    return "".join(out)


def random_codepoints(rng, n):
    """Random assigned code points (per Python's Unicode tables), avoiding surrogates and the
    Unicode-version edges documented in docs/tokenizer.md."""
    out = []
    while len(out) < n:
        r = rng.random()
        if r < 0.5:
            cp = rng.randrange(0x20, 0x3000)
        elif r < 0.8:
            cp = rng.randrange(0x3000, 0x10000)
        else:
            cp = rng.randrange(0x10000, 0x30000)
        if 0xD800 <= cp < 0xE000:
            continue
        ch = chr(cp)
        if unicodedata.category(ch) == "Cn":
            continue
        out.append(ch)
    return "".join(out)


def write_probe_goldens(tok):
    """IN/OUT pairs for `h3 probe tokenize` (PROBE.md: text u8 [n] -> input_ids i64 [L])."""
    import numpy as np
    from safetensors.numpy import save_file
    gdir = os.path.dirname(OUT)
    probes = {
        "mixed": "(S1) says, <d>[English] Hey! Watch your dog!</d> 一只红狐狸 caf\u0065\u0301 's \U0001f9d1\U0001f3fd\u200d\U0001f680\n\n  x",
        "guide": hand_cases()[-5],
        "empty": "",
    }
    for name, text in probes.items():
        raw = np.frombuffer(text.encode("utf-8"), dtype=np.uint8).copy()
        save_file({"text": raw}, os.path.join(gdir, name + ".in.safetensors"))
        save_file({"input_ids": np.array(encode(tok, text), dtype=np.int64)}, os.path.join(gdir, name + ".out.safetensors"))
    # inputs the probe must refuse: invalid UTF-8 (a lone continuation byte), and a wrong dtype
    save_file({"text": np.frombuffer(b"ok \x80 no", dtype=np.uint8).copy()}, os.path.join(gdir, "bad_utf8.in.safetensors"))
    save_file({"text": np.arange(5, dtype=np.int64)}, os.path.join(gdir, "bad_dtype.in.safetensors"))
    for f in os.listdir(gdir):
        if f.endswith(".safetensors"):
            os.chmod(os.path.join(gdir, f), 0o644)
    print("wrote probe goldens to %s" % gdir)


def encode(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--random", type=int, default=0, help="write N random cases instead of the golden file")
    ap.add_argument("--codepoints", action="store_true", help="random cases over all assigned code points")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    tok = load_tokenizer()

    if args.random:
        rng = random.Random(args.seed)
        texts = []
        for _ in range(args.random):
            n = rng.randrange(1, 40)
            texts.append(random_codepoints(rng, n) if args.codepoints else random_text(rng, n))
        cases = [{"text": t, "ids": encode(tok, t)} for t in texts]
        out = args.out or "/tmp/tokenizer_random_cases.json"
        with open(out, "w", encoding="utf-8") as f:
            json.dump({"source": "random (seed %d)" % args.seed, "cases": cases}, f, ensure_ascii=False)
        print("wrote %d random cases to %s" % (len(cases), out))
        return 0

    # the existing hand-written fixture must agree with the reference
    bad = 0
    with open(OLD_CASES, encoding="utf-8") as f:
        old = json.load(f)
    for case in old["cases"]:
        got = encode(tok, case["text"])
        if got != case["ids"]:
            bad += 1
            print("MISMATCH in tokenizer_cases.json: %r: file %s, reference %s" % (case["text"][:60], case["ids"][:20], got[:20]))
    for s, i in list(old.get("special_ids", {}).items()) + list(old.get("added_ids", {}).items()):
        if tok.convert_tokens_to_ids(s) != i:
            bad += 1
            print("MISMATCH special id %s: file %d, reference %d" % (s, i, tok.convert_tokens_to_ids(s)))
    print("tokenizer_cases.json: %d cases checked, %d mismatches" % (len(old["cases"]), bad))

    texts = hand_cases()
    rng = random.Random(20261130)
    texts += [random_text(rng, rng.randrange(1, 30)) for _ in range(120)]
    texts += [random_codepoints(rng, rng.randrange(1, 12)) for _ in range(40)]
    seen, uniq = set(), []
    for t in texts:
        if t not in seen:
            seen.add(t)
            uniq.append(t)
    cases = [{"text": t, "ids": encode(tok, t)} for t in uniq]
    import tokenizers
    import transformers
    doc = {
        "source": "transformers %s AutoTokenizer (%s, tokenizers %s) from tests/fixtures/skeleton/tokenizer, "
                  "add_special_tokens=False; generated by tools/reference/gen_tokenizer_cases.py"
                  % (transformers.__version__, type(tok).__name__, tokenizers.__version__),
        "vocab_size": len(tok),
        "added_ids": {s: tok.convert_tokens_to_ids(s) for s in ADDED},
        "cases": cases,
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    tmp = OUT + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        # one case per line keeps diffs readable; ASCII-only so every byte of the text is explicit
        head = {k: v for k, v in doc.items() if k != "cases"}
        f.write(json.dumps(head, ensure_ascii=True)[:-1] + ', "cases": [\n')
        f.write(",\n".join(json.dumps(c, ensure_ascii=True) for c in cases))
        f.write("\n]}\n")
    os.replace(tmp, OUT)
    print("wrote %d cases to %s (%d bytes)" % (len(cases), OUT, os.path.getsize(OUT)))
    write_probe_goldens(tok)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
