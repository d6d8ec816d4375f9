"""The checkout's downpour package, importable without python/install.sh.

    sys.path.insert(0, os.path.join(ROOT, "python"))
    import checkout_package
    pkg = checkout_package.install(folder)    # then `import downpour`

For the tests and benchmarks: they must not depend on (or change) the
user's install. install() copies python/downpour into folder/pkg, generates
its protobuf modules there (python/build_protos.sh, Debian's protoc), puts
folder/pkg first on sys.path and returns it (a subprocess's PYTHONPATH).
"""

import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def install(folder):
    pkg = os.path.join(folder, "pkg")
    shutil.rmtree(pkg, ignore_errors=True)
    shutil.copytree(os.path.join(HERE, "downpour"),
                    os.path.join(pkg, "downpour"),
                    ignore=shutil.ignore_patterns("_proto", "__pycache__"))
    subprocess.run([os.path.join(HERE, "build_protos.sh"),
                    os.path.join(pkg, "downpour", "_proto")], check=True,
                   stdout=subprocess.DEVNULL)
    sys.path.insert(0, pkg)
    return pkg
