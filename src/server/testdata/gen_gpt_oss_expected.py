#!/usr/bin/env python3
"""Renders the gpt-oss chat template on the cases of ../shared/chat-templates (its
gen_expected.py, imported: the same conversations and Jinja2 environment as transformers)
and writes gpt-oss-expected.jsonl beside this file, in the same format. The shared folder
has no gpt-oss template; src/server/template_formats_test.cpp checks herd renders these.

Run from anywhere: python3 src/server/testdata/gen_gpt_oss_expected.py (needs python3-jinja2).
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', '..', '..', '..', 'shared', 'chat-templates'))
import gen_expected  # noqa: E402

gen_expected.TEMPLATE_DIR = HERE
# bos/eos: the gpt-oss vocabulary's (../shared/vocab/ggml-vocab-gpt-4o.gguf).
gen_expected.TEMPLATES = {
    'openai-gpt-oss-120b.jinja': ('openai/gpt-oss-120b', '<|startoftext|>', '<|return|>'),
}
rows, dropped = gen_expected.build()
with open(os.path.join(HERE, 'gpt-oss-expected.jsonl'), 'w', encoding='utf-8', newline='\n') as f:
    for r in rows:
        f.write(json.dumps(r, ensure_ascii=False) + '\n')
print(f'{len(rows)} cases ({sum("raises" in r for r in rows)} raise)')
for d in dropped:
    print('dropped:', *d)
