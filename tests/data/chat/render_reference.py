#!/usr/bin/env python3
"""Cross-checks cohort's chat-template renderings against Python Jinja2 configured the way
transformers configures it (trim_blocks, lstrip_blocks, loopcontrols, json.dumps tojson,
raise_exception, strftime_now) with the variables llama.cpp passes.

The expected files next to this script were written by hand from the templates; this script
is an independent second opinion, not their source. Usage:

  render_reference.py TEMPLATE_DIR [COHORT_OUTPUT_DIR [SCENARIO]]

Renders every TEMPLATE_DIR/*.jinja with a conversation (SCENARIO: basic, nosys or tricky;
bos "<BOS>", eos "<EOS>", 2025-03-15 12:00 UTC) and, given COHORT_OUTPUT_DIR (files
NAME.txt), reports each difference. Without it, checks the expected files of this folder.
"""
import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = datetime.datetime(2025, 3, 15, 12, 0, 0)
MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Hello!"},
    {"role": "assistant", "content": "Hi there. How can I help?"},
    {"role": "user", "content": "What is 2+2?"},
]
SCENARIOS = {
    "basic": (MESSAGES, True),
    "nosys": ([{"role": "user", "content": "Hello!"}], False),
    "tricky": ([
        {"role": "system", "content": "  Be terse. \n"},
        {"role": "user", "content": "Quote \"this\" and 'that' \u2014 \u00fcn\u00efc\u00f6d\u00e9 \U0001f642\n"},
        {"role": "assistant", "content": "<think>\nplan\n</think>\n\nSure."},
        {"role": "user", "content": "  again  "},
    ], True),
}
# bos/eos of the hand-written expected files in this folder (the rest use <BOS>/<EOS>).
SPECIAL = {
    "meta-llama-Llama-3.1-8B-Instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "meta-llama-Llama-3.2-3B-Instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "meta-llama-Llama-3.3-70B-Instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "Qwen-Qwen2.5-7B-Instruct": ("", "<|im_end|>"),
    "Qwen-Qwen3-0.6B": ("", "<|im_end|>"),
    "deepseek-ai-DeepSeek-V3.1": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "Kimi-K2-Instruct": ("[BOS]", "[EOS]"),
    "mistralai-Mistral-Nemo-Instruct-2407": ("<s>", "</s>"),
    "Mistral-Small-3.2-24B-Instruct-2506": ("<s>", "</s>"),
    "openai-gpt-oss-120b": ("<|startoftext|>", "<|return|>"),
}


class GenerationTag(jinja2.ext.Extension):
    """transformers' AssistantTracker, minus the tracking: {% generation %} just renders."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, jinja2.ext.loopcontrols])

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: NOW.strftime(fmt)
    return env


def render(env, source, bos, eos, scenario):
    messages, add_generation_prompt = SCENARIOS[scenario]
    variables = dict(messages=messages, bos_token=bos, eos_token=eos, enable_thinking=True,
                     date_string=NOW.strftime("%d %b %Y"), datetime=NOW.strftime("%b %d %Y"))
    if add_generation_prompt:  # llama.cpp defines it only when true
        variables["add_generation_prompt"] = True
    return env.from_string(source).render(**variables)


def main():
    template_dir = sys.argv[1]
    cohort_dir = sys.argv[2] if len(sys.argv) > 2 else None
    scenario = sys.argv[3] if len(sys.argv) > 3 else "basic"
    here = os.path.dirname(os.path.abspath(__file__))
    env = make_env()
    bad = 0
    for file in sorted(os.listdir(template_dir)):
        if not file.endswith(".jinja"):
            continue
        name = file[:-6]
        if cohort_dir is None and name not in SPECIAL:
            continue
        bos, eos = SPECIAL.get(name, ("<BOS>", "<EOS>")) if cohort_dir is None else ("<BOS>", "<EOS>")
        with open(os.path.join(template_dir, file), encoding="utf-8") as f:
            source = f.read()
        try:
            want = render(env, source, bos, eos, scenario)
        except Exception as e:  # noqa: BLE001 - report and continue
            print(f"{name}: jinja2 error: {type(e).__name__}: {e}")
            continue
        got_path = os.path.join(cohort_dir or here, name + ".txt")
        if not os.path.exists(got_path):
            print(f"{name}: no cohort output")
            continue
        with open(got_path, encoding="utf-8", newline="") as f:
            got = f.read()
        if got != want:
            bad += 1
            print(f"{name}: DIFFERS\n  jinja2: {want!r}\n  cohort: {got!r}")
    print(f"{bad} differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
