"""The ctypes declarations of python/clattn/_api.py against the C layout they copy by hand.

tests/abi_layout.c (built by meson as BUILD/tests/abi_layout, installed nowhere) prints, as the
compiler lays them out, the public structs the package mirrors (sizeof, alignof; each field's
name, offset, size, alignment and kind: float, integer or other) and the constants it copies.
Here every ctypes.Structure of the package must mirror one of those structs field for field
(same names in the same order, same offsets, sizes, alignments and kinds; a reserved array of
another length or a missing field fails), every ALL-CAPS integer of _api.py must equal the C
constant CLATTN_<NAME>, and the package's tables of enum names must name exactly the C enum's
values. The C table itself is checked against the headers' text (each struct's members, in
order), so that a member the table forgot fails too.

No OpenCL device is needed. CLATTN_ABI_LAYOUT must name the built program (tools/test-python.sh
sets it); by hand, from the repository root:
  CLATTN_ABI_LAYOUT=build/tests/abi_layout python -m pytest tests/python/test_abi_layout.py
"""

import ctypes
import importlib
import json
import os
import pathlib
import re
import subprocess

import pytest

import clattn
from clattn import _api, encoder

HEADERS = pathlib.Path(__file__).resolve().parents[2] / "include" / "clattn"

# Each ctypes.Structure of the package ("module.Class") -> the C struct it mirrors. A new
# Structure must be added here and to tests/abi_layout.c.
C_STRUCTS = {
    "_api.DeviceInfo": "clattn_device_info",
    "_api.ContextParams": "clattn_context_params",
    "_api.SentenceModelInfo": "clattn_sentence_model_info",
    "_api.EmbedParams": "clattn_embed_params",
    "_api.TokenizerSpecial": "clattn_tokenizer_special",
    "_api.CrossEncoderInfo": "clattn_cross_encoder_info",
    "_api.CrossEncoderParams": "clattn_cross_encoder_params",
    "_api.SdpaParams": "clattn_sdpa_params",
    "_api.MhaConfig": "clattn_mha_config",
    "_api.HostTensor": "clattn_host_tensor",
    "_api.MhaWeights": "clattn_mha_weights",
    "_api.MhaForwardParams": "clattn_mha_forward_params",
    "_api.EncoderConfig": "clattn_encoder_config",
    "_api.EncoderForwardParams": "clattn_encoder_forward_params",
    "_api.LlmInfo": "clattn_llm_info",
    "_api.LlmSampling": "clattn_llm_sampling",
    "_api.LlmGenerateOptions": "clattn_llm_generate_options",
    "_api.LlmGeneration": "clattn_llm_generation",
}

# The package's tables of a C enum's names: (module, table, the enum's constants' prefix,
# whether the table maps name -> value rather than value -> name). Its names are the constants'
# lower-case suffixes: PRECISIONS["bf16"] is CLATTN_PRECISION_BF16.
NAME_TABLES = [
    (_api, "PRECISIONS", "CLATTN_PRECISION_", True),
    (_api, "POOLING_NAMES", "CLATTN_POOLING_", False),
    (encoder, "_ACTIVATION_NAMES", "CLATTN_ACTIVATION_", False),
    (encoder, "_POSITIONAL_NAMES", "CLATTN_POSITIONAL_", False),
]


def package_structures():
    """Every ctypes Structure or Union class defined in a Python module of the package (the
    installed package's folder also holds libclattn.so, which is no module to import)."""
    found = {}
    for source in sorted(pathlib.Path(clattn.__file__).parent.glob("*.py")):
        module = importlib.import_module(f"clattn.{source.stem}")
        for obj in vars(module).values():
            if (isinstance(obj, type) and issubclass(obj, (ctypes.Structure, ctypes.Union))
                    and obj.__module__ == module.__name__):
                found[f"{source.stem}.{obj.__qualname__}"] = obj
    return found


STRUCTURES = package_structures()


@pytest.fixture(scope="module")
def c_layout():
    program = os.environ.get("CLATTN_ABI_LAYOUT")
    if not program:
        pytest.fail("CLATTN_ABI_LAYOUT must name the built layout table, BUILD/tests/abi_layout "
                    "(tools/test-python.sh sets it)")
    run = subprocess.run([program], capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, f"{program} exited {run.returncode}: {run.stderr.strip()}"
    return json.loads(run.stdout)


def ctypes_kind(field_type) -> str:
    """The C table's kind of a ctypes field type: float, integer or other (a pointer, a
    function pointer, an array, a struct)."""
    if issubclass(field_type, ctypes._SimpleCData):
        code = field_type._type_
        if code in "fdg":
            return "float"
        if code in "zZPO":  # char *, wchar_t *, void *, a Python object
            return "other"
        return "integer"
    return "other"


def ctypes_rows(cls):
    rows = []
    for name, field_type, *bits in cls._fields_:
        assert not bits, f"{cls.__name__}.{name} is a bit field: the C table has none"
        descriptor = getattr(cls, name)
        rows.append((name, descriptor.offset, descriptor.size, ctypes.alignment(field_type),
                     ctypes_kind(field_type)))
    return rows


def c_rows(layout):
    return [(f["name"], f["offset"], f["size"], f["align"], f["kind"]) for f in layout["fields"]]


ROW_HEADINGS = "(name, offset, size, align, kind)"


def describe_difference(py_rows, c_rows_):
    """The first field where the two lists differ, and the names only one of them has."""
    lines = []
    for i, (ours, theirs) in enumerate(zip(py_rows, c_rows_)):
        if ours != theirs:
            lines.append(f"field {i} {ROW_HEADINGS}: ctypes {ours}, C {theirs}")
            break
    ours_names = [row[0] for row in py_rows]
    c_names = [row[0] for row in c_rows_]
    missing = [name for name in c_names if name not in ours_names]
    extra = [name for name in ours_names if name not in c_names]
    if missing:
        lines.append(f"in C, not in ctypes: {missing}")
    if extra:
        lines.append(f"in ctypes, not in C: {extra}")
    if len(py_rows) != len(c_rows_):
        lines.append(f"{len(py_rows)} fields in ctypes, {len(c_rows_)} in C")
    return "; ".join(lines)


def test_every_structure_is_mapped_to_its_c_struct():
    assert sorted(STRUCTURES) == sorted(C_STRUCTS), (
        "a ctypes Structure of the package without its C struct in C_STRUCTS (and in "
        "tests/abi_layout.c), or an entry of C_STRUCTS that no longer exists")


def test_c_table_lists_the_mirrored_structs(c_layout):
    assert sorted(c_layout["structs"]) == sorted(C_STRUCTS.values())


@pytest.mark.parametrize("qualified", sorted(STRUCTURES))
def test_structure_matches_c_layout(qualified, c_layout):
    cls = STRUCTURES[qualified]
    c_name = C_STRUCTS.get(qualified)
    assert c_name in c_layout["structs"], f"{qualified}: no C struct mapped in C_STRUCTS"
    layout = c_layout["structs"][c_name]
    ours, theirs = ctypes_rows(cls), c_rows(layout)
    assert ours == theirs, f"{qualified} ({c_name}): {describe_difference(ours, theirs)}"
    assert (ctypes.sizeof(cls), ctypes.alignment(cls)) == (layout["size"], layout["align"]), (
        f"{qualified} ({c_name}): ctypes size {ctypes.sizeof(cls)} align "
        f"{ctypes.alignment(cls)}, C size {layout['size']} align {layout['align']}")


def _without_comments(text: str) -> str:
    return re.sub(r"//[^\n]*", " ", re.sub(r"/\*.*?\*/", " ", text, flags=re.S))


HEADER_TEXT = _without_comments("\n".join(
    path.read_text(encoding="utf-8") for path in sorted(HEADERS.glob("*.h"))))


def header_members(c_name: str):
    """The member names of `typedef struct c_name { ... } c_name;` in the public headers, in
    order (one declaration per `;`; arrays, pointers and function pointers)."""
    match = re.search(rf"\bstruct\s+{c_name}\s*\{{([^{{}}]*)\}}\s*{c_name}\s*;", HEADER_TEXT)
    assert match, f"no `typedef struct {c_name} {{ ... }} {c_name};` (without nested braces) " \
                  f"in {HEADERS}"
    members = []
    for declaration in match.group(1).split(";"):
        declaration = declaration.strip()
        if not declaration:
            continue
        function_pointer = re.search(r"\(\s*\*\s*(\w+)\s*\)", declaration)
        if function_pointer:
            members.append(function_pointer.group(1))
            continue
        declaration = re.sub(r"\[[^\]]*\]|:\s*\w+", "", declaration)
        for declarator in declaration.split(","):
            members.append(re.findall(r"\w+", declarator)[-1])
    return members


@pytest.mark.parametrize("c_name", sorted(C_STRUCTS.values()))
def test_c_table_lists_every_member_of_the_header(c_name, c_layout):
    """A member added to a header where padding was (no offset moves) must reach the table."""
    listed = [field["name"] for field in c_layout["structs"][c_name]["fields"]]
    assert listed == header_members(c_name), (
        f"tests/abi_layout.c lists {c_name}'s fields otherwise than its header declares them")


def test_header_parser_reads_every_kind_of_member():
    assert header_members("clattn_context_params") == [
        "device", "log_callback", "log_user_data", "log_level", "profiling",
        "workspace_limit_bytes", "precision", "reserved"]
    assert header_members("clattn_cross_encoder_info")[:2] == ["num_labels", "labels"]


def test_constants_match_c(c_layout):
    constants = c_layout["constants"]
    copied = {name: value for name, value in vars(_api).items()
              if name.isupper() and type(value) is int}
    assert copied, "no constant found in _api.py"
    for name, value in sorted(copied.items()):
        c_name = f"CLATTN_{name}"
        assert c_name in constants, f"_api.{name}: {c_name} is not in tests/abi_layout.c"
        assert value == constants[c_name], (
            f"_api.{name} = {value}, C {c_name} = {constants[c_name]}")


@pytest.mark.parametrize("module, table, prefix, by_name", NAME_TABLES,
                         ids=[f"{entry[0].__name__}.{entry[1]}" for entry in NAME_TABLES])
def test_name_table_names_every_enum_value(module, table, prefix, by_name, c_layout):
    names = getattr(module, table)
    ours = dict(names) if by_name else {name: value for value, name in names.items()}
    theirs = {c_name[len(prefix):].lower(): value
              for c_name, value in c_layout["constants"].items() if c_name.startswith(prefix)}
    assert theirs, f"no {prefix}* constant in tests/abi_layout.c"
    assert ours == theirs, f"{module.__name__}.{table} differs from the C enum {prefix}*"
