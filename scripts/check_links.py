#!/usr/bin/env python3
"""Fails when a relative link or image in a tracked Markdown file points to no file.

http(s) and mailto links and pure #anchors are left alone; a #fragment is stripped. Links
inside code (fenced blocks and `inline code`) are not links.
"""
import os
import re
import subprocess
import sys

LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
bad = 0
files = subprocess.run(["git", "ls-files", "*.md"], capture_output=True, text=True, check=True)
for md in files.stdout.split():
    fenced = False
    for n, line in enumerate(open(md, encoding="utf-8"), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced:
            continue
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"(https?|mailto):", target) or target.startswith("#"):
                continue
            path = target.split("#", 1)[0]
            full = os.path.normpath(os.path.join(os.path.dirname(md), path))
            if not os.path.exists(full):
                print(f"{md}:{n}: broken link: {target}")
                bad += 1
sys.exit(1 if bad else 0)
