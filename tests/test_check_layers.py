#!/usr/bin/env python3
"""tools/check_layers.py against small made-up trees: a clean one passes, and each kind of
violation (a file in no layer folder, an upward include, an upward call, a cycle, the umbrella
header) fails with a message naming it. Exits 1 on the first surprise."""
import os
import subprocess
import sys
import tempfile

CHECK = sys.argv[1]

BASE_TREE = {
    "meson.build": "clattn_layers = ['base', 'runtime', 'models']\n",
    "base/sizes.h": "#define CLATTN_SIZES 1\n",
    "runtime/buffers.h": '#include "base/sizes.h"\nint clattn__buffer(void);\n',
    "runtime/buffers.c": '#include "buffers.h"\nint clattn__buffer(void) { return 1; }\n',
    "models/model.c": '#include "runtime/buffers.h"\n#include "clattn/common.h"\n'
                      "int clattn_model(void) { return clattn__buffer(); }\n",
}


def run(changes):
    with tempfile.TemporaryDirectory() as root:
        tree = dict(BASE_TREE, **changes)
        for path, text in tree.items():
            if text is None:
                continue
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            with open(os.path.join(root, path), "w", encoding="utf-8") as fh:
                fh.write(text)
        done = subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True)
        return done.returncode, done.stdout


def expect(name, changes, code, needle):
    rc, out = run(changes)
    if rc != code or needle not in out:
        print(f"FAIL {name}: exit {rc} (expected {code}), output:\n{out}")
        sys.exit(1)
    print(f"ok {name}")


expect("clean tree", {}, 0, "3 layers (base < runtime < models)")
expect("file outside the layer folders", {"stray.c": "int x;\n"}, 1,
       "stray.c: not in a layer folder")
expect("file in an unlisted folder", {"extra/thing.c": "int y;\n"}, 1,
       "extra/thing.c: not in a layer folder")
expect("upward include", {"runtime/buffers.c": '#include "buffers.h"\n#include "models/model.h"\n'
                          "int clattn__buffer(void) { return 1; }\n",
                          "models/model.h": "int clattn_model(void);\n"}, 1,
       "runtime/buffers.c (runtime) includes models/model.h")
expect("upward call", {"runtime/buffers.c": "int clattn_model(void);\n"
                       "int clattn__buffer(void) { return clattn_model(); }\n"}, 1,
       "runtime/buffers.c (runtime) calls clattn_model")
expect("cycle in one layer", {"runtime/a.c": "int clattn__b(void);\n"
                              "int clattn__a(void) { return clattn__b(); }\n",
                              "runtime/b.c": "int clattn__a(void);\n"
                              "int clattn__b(void) { return clattn__a(); }\n"}, 1,
       "cycle among runtime/a.c, runtime/b.c")
expect("umbrella header", {"models/model.c": '#include "clattn/clattn.h"\n'
                           "int clattn_model(void) { return 0; }\n"}, 1,
       "models/model.c includes clattn/clattn.h")
expect("no layer list", {"meson.build": "project('x')\n"}, 1, "")
print("check_layers: 8 passed, 0 failed")
