"""Execute a notebook top to bottom with nbclient, as "Run all" would, in a work folder.

    python -m course.authoring.run_notebook NOTEBOOK WORKDIR [--timeout S] [--save PATH]

Prints each cell's output; exits 1 at the first failing cell, naming it. --save writes the
notebook with its outputs, and nothing else of the run: its metadata and cells stay as
generated, so `generate --check` still knows it as current (an instructor notebook is kept
with the outputs of a GPU run).

With COURSE_RELEASE set (a release's runtime/ folder), the notebook runs as in Colab: the
kernel cannot import this checkout's `course`, and the first cell installs the runtime from
the release.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def run(
    path: str, workdir: str, timeout: int = 900, environ: dict[str, str] | None = None
) -> tuple[bool, nbformat.NotebookNode, str]:
    """Returns (ok, executed notebook, error text); `environ`: variables added to the kernel's."""
    os.makedirs(workdir, exist_ok=True)
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": workdir}})
    try:
        client.execute(env=kernel_env(workdir, environ))
    except CellExecutionError as error:
        return False, notebook, str(error)
    return True, notebook, ""


def kernel_env(workdir: str, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The kernel's environment: this one with `environ` added. What the notebook pip-installs
    goes to a folder of the run's own, on the kernel's path, not to this Python's environment:
    a package's editable install (day07) or the runtime's wheel would outlive the run."""
    env = dict(os.environ, **(environ or {}))
    target = os.path.join(os.path.abspath(workdir), ".pip_target")
    os.makedirs(target, exist_ok=True)
    paths = [path for path in env.get("PYTHONPATH", "").split(os.pathsep) if path]
    if env.get("COURSE_RELEASE"):  # as in Colab: no course on the path but what the notebook installs
        paths = [path for path in paths if not os.path.exists(os.path.join(path, "course", "__init__.py"))]
        paths.insert(0, _hidden_checkout(workdir))
    return dict(env, PIP_TARGET=target, PYTHONPATH=os.pathsep.join([target, *paths]))


def _hidden_checkout(workdir: str) -> str:
    """A folder whose `course` fails to import: on the path after the install folder, it hides
    an editable install of the checkout (`pip install -e .`), whose finder Python asks only
    after the path, until the notebook installs the runtime in front of it."""
    folder = os.path.join(os.path.abspath(workdir), ".no_checkout")
    os.makedirs(os.path.join(folder, "course"), exist_ok=True)
    with open(os.path.join(folder, "course", "__init__.py"), "w", encoding="utf-8") as handle:
        handle.write('raise ImportError("the course runtime is not installed here: the notebook installs it")\n')
    return folder


def with_outputs(original: nbformat.NotebookNode, executed: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """`original` with the outputs and execution counts of `executed` (the same cells, run)."""
    kept = nbformat.from_dict(original)
    for cell, ran in zip(kept.cells, executed.cells):
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = ran.get("outputs", []), ran.get("execution_count")
    return kept


def outputs_text(notebook: nbformat.NotebookNode) -> str:
    chunks = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                chunks.append(output["text"])
            elif output.get("output_type") == "error":
                chunks.append(f"{output['ename']}: {output['evalue']}\n")
            elif "text/plain" in output.get("data", {}):
                chunks.append(output["data"]["text/plain"] + "\n")
    return "".join(chunks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("notebook")
    parser.add_argument("workdir")
    parser.add_argument("--timeout", type=int, default=900)
    parser.add_argument("--fresh", action="store_true", help="empty the work folder first")
    parser.add_argument("--save", help="write the notebook with its outputs here (only when every cell ran)")
    args = parser.parse_args()
    if args.fresh:
        shutil.rmtree(args.workdir, ignore_errors=True)
    ok, notebook, error = run(args.notebook, args.workdir, args.timeout)
    print(outputs_text(notebook))
    if ok and args.save:
        with open(args.save, "w", encoding="utf-8") as handle:
            handle.write(nbformat.writes(with_outputs(nbformat.read(args.notebook, as_version=4), notebook)) + "\n")
    if not ok:
        print(error.splitlines()[-1] if error else "failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
