"""Prompt tokens of the analyst's file list per DABench dev question: the full profile against the compact one.

For every question of the share, the file list the analyst would read is rendered both ways (the budget is
`analyst.profile_chars`) and tokenized with the embedded model's own tokenizer (the GGUF's vocabulary only, no
weights are loaded). Prints the median and range of each and of the whole opening prompt (system prompt, worked
example and task turn, message contents only).

    python benchmarks/profile_tokens.py [--data DIR] [--model qwen2.5-coder-1.5b]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from worldsmith.agents.analyst import few_shot_messages, required_names, system_prompt, user_prompt
from worldsmith.core.config import load_settings
from worldsmith.llm.models import ensure_model, get_spec
from worldsmith.tools.files import profile_workspace

DABENCH = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "dabench-dev"


def _tokenizer(model: str, models_dir: Path):  # type: ignore[no-untyped-def]
    from llama_cpp import Llama

    llm = Llama(model_path=str(ensure_model(get_spec(model), models_dir)), vocab_only=True, verbose=False)
    return lambda text: len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))


def _summary(label: str, values: list[int]) -> str:
    return f"{label:<34} median {statistics.median(values):>6.0f}   min {min(values):>5}   max {max(values):>5}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DABENCH)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    args = ap.parse_args()
    settings = load_settings()
    count = _tokenizer(args.model, settings.llm.resolved_models_dir(settings.home))
    budget = settings.analyst.profile_chars
    fixed = sum(count(m["content"]) for m in [{"content": system_prompt()}, *few_shot_messages()])
    questions = [json.loads(line) for line in (args.data / "questions.jsonl").read_text().splitlines() if line.strip()]
    full, compact, opening = [], [], []
    cache: dict[str, tuple[str, str]] = {}
    for q in questions:
        name = q["file_name"]
        if name not in cache:
            ws = profile_workspace([args.data / "tables" / name], as_mounted=True)
            cache[name] = (ws.to_prompt(max_chars=budget), ws.to_prompt(max_chars=budget, compact=True))
        old, new = cache[name]
        full.append(count(old))
        compact.append(count(new))
        question = "\n".join(filter(None, [q["question"], q.get("constraints"), q.get("format")]))
        opening.append(fixed + count(user_prompt(question, new, required_names(question))))
    print(f"{len(questions)} questions over {len(cache)} files, profile budget {budget} chars, "
          f"tokenizer of {args.model}")
    print(_summary("full profile (tokens)", full))
    print(_summary("compact profile (tokens)", compact))
    print(_summary("opening prompt, compact (tokens)", opening))
    print(f"system prompt + worked example: {fixed} tokens (the cached prefix shared by every question)")


if __name__ == "__main__":
    main()
