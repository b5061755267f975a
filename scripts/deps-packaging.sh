#!/usr/bin/env bash
# Installs what `make deb` and `make test-packaging` need, skipping what is
# already there. Separate from deps.sh so that `make run` does not pay for it.
#   deps-packaging.sh cargo-deb   cargo-deb only (make deb)
#   deps-packaging.sh             everything (make test-packaging)
# Prints the kubernetes-validate venv's bin directory last when asked for all.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_DEB_VERSION=3.8.0          # keep in step with packaging/install.mk
KUBERNETES_VALIDATE_VERSION=1.37.0
VENV=target/tools/kubernetes-validate-$KUBERNETES_VALIDATE_VERSION

# cargo-deb: ~3 CPU-minutes to compile, once per machine (~/.cargo/bin).
if ! cargo deb --version 2>/dev/null | grep -qx "cargo-deb $CARGO_DEB_VERSION"; then
  echo "deps-packaging: installing cargo-deb $CARGO_DEB_VERSION" >&2
  nice -n 10 cargo install --locked --quiet cargo-deb --version "$CARGO_DEB_VERSION" >&2
fi
[[ "${1:-}" == cargo-deb ]] && exit 0

# lintian (the package's lint), systemd (systemd-analyze), python3-venv
# (kubernetes-validate), dpkg-dev. lintian alone is ~3 min to install.
PACKAGES=(lintian systemd python3-venv dpkg-dev)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps-packaging: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# kubernetes-validate ships the Kubernetes JSON schemas, so it works offline
# (kubeconform fetches them at run time). Debian's python, in a venv of our own.
if [[ ! -x $VENV/bin/kubernetes-validate ]]; then
  echo "deps-packaging: installing kubernetes-validate $KUBERNETES_VALIDATE_VERSION" >&2
  rm -rf "$VENV"
  /usr/bin/python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check \
    "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" >&2
fi
echo "$VENV/bin"
