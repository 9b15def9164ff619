"""The project's wheels for the flow image, on top of the sandbox image (deployments/flow.Dockerfile,
build-flow-image-offline.sh); standard library and pip only.

    python deployments/flow_overlay.py --resolve DIR          # wheels + DIR/constraints.txt
    python deployments/flow_overlay.py --installed            # this interpreter's distributions
    python deployments/flow_overlay.py --replaced DIR FILE    # those under DIR that FILE lists too

The flow image installs the project into the sandbox image's /opt/venv, whose program stack is
pinned by ``requirements-tabular.txt``. ``--resolve``, run by the image's own interpreter (markers
such as ``python_full_version < "3.11.3"`` must be its own), downloads one consistent set of
wheels for the project's requirements that keeps every
pin of the program stack the project's dependencies accept, and drops the others
(``python-dateutil==4.0.0`` and ``SQLAlchemy==2.1.9`` against Prefect's ``<3`` and ``<2.1``):
pip is run with the pins as constraints, and each pin it reports as conflicting is left out for
the next try. ``DIR/constraints.txt`` then pins exactly the downloaded versions, so the image's
``pip install --no-index`` has one candidate per package and nothing to search.

``pip install --prefix`` puts what the venv lacks into an overlay; pip removes the replaced
versions in the build stage only, so ``--replaced`` lists them (``--installed`` taken before
the install) and the final stage uninstalls them before copying the overlay over the venv.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONFLICT = re.compile(r"The user requested \(constraint\) ([A-Za-z0-9_.\-]+)==")


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def resolve(wheels: Path, tries: int = 10) -> None:
    """Download the wheels into ``wheels`` and write ``wheels/constraints.txt`` (module docstring).

    Raises:
        SystemExit: pip failed for another reason than a conflicting pin, or ``tries`` ran out.
    """
    wheels.mkdir(parents=True, exist_ok=True)
    project = tomllib.loads((HERE.parent / "pyproject.toml").read_text())
    (wheels / "requirements.txt").write_text(
        "\n".join([*project["project"]["dependencies"], *project["build-system"]["requires"]]) + "\n")
    pins = [line.split("#", 1)[0].strip() for line in (HERE / "requirements-tabular.txt").read_text().splitlines()]
    pins = [p for p in pins if p]
    for _ in range(tries):
        (wheels / "pins.txt").write_text("\n".join(pins) + "\n")
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--disable-pip-version-check",
                               "--only-binary=:all:", "-d", str(wheels), "-c", str(wheels / "pins.txt"),
                               "-r", str(wheels / "requirements.txt")], capture_output=True, text=True)
        if done.returncode == 0:
            break
        dropped = {_key(name) for name in CONFLICT.findall(done.stdout + done.stderr)}
        if not dropped:
            sys.exit(f"pip download failed:\n{done.stderr[-3000:]}")
        print(f"flow image: the project's dependencies exclude the program stack's pins of {sorted(dropped)}")
        pins = [p for p in pins if _key(re.split(r"[=<>!~ \[]", p, maxsplit=1)[0]) not in dropped]
    else:
        sys.exit(f"pip download kept conflicting after {tries} tries")
    exact = set()
    for wheel in wheels.glob("*.whl"):
        name, version = wheel.name.split("-")[:2]
        exact.add(f"{_key(name)}=={version}")
    (wheels / "constraints.txt").write_text("\n".join(sorted(exact)) + "\n")


def installed() -> list[str]:
    """This interpreter's distributions (normalised names)."""
    return sorted({_key(d.metadata["Name"]) for d in metadata.distributions()})


def replaced(prefix: Path, before: Path) -> list[str]:
    """Distributions installed under ``prefix`` that ``before`` (an ``--installed`` list) names."""
    names = {_key(d.name.rsplit("-", 1)[0]) for d in prefix.glob("lib/python*/site-packages/*.dist-info")}
    return sorted(names & set(before.read_text().split()))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--resolve":
        resolve(Path(sys.argv[2]))
    elif len(sys.argv) == 4 and sys.argv[1] == "--replaced":
        print("\n".join(replaced(Path(sys.argv[2]), Path(sys.argv[3]))))
    elif sys.argv[1:] == ["--installed"]:
        print("\n".join(installed()))
    else:
        sys.exit(__doc__)
