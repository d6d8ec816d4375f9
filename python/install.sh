#!/usr/bin/env bash
# Installs the downpour Python package for the current user: generates the
# protobuf modules (python/build_protos.sh) and puts python/ on Python's path
# with a .pth file in the user site folder, so `import downpour` works from
# anywhere while the checkout stays where it is. Needs Debian's
# python3-grpcio python3-protobuf python3-numpy python3-yaml and
# protobuf-compiler (deploy/install_deps.sh --tests installs them).
#   python/install.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
"$here/build_protos.sh"
py=/usr/bin/python3
site="$("$py" -m site --user-site)"
mkdir -p "$site"
echo "$here" >"$site/downpour.pth"
"$py" -c 'import downpour; print("install: downpour", downpour.__version__, "from", downpour.__file__)'
