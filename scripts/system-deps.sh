#!/usr/bin/env bash
# Make sure the system programs the test suite uses are present:
#   java 17+ (Spark), tshark (wire conformance), iptables and ip (fault tests in network namespaces).
# With the argument 'java' it sees to Java alone (make run); with 'compiler' to what compiles openum's
# hot paths (a C compiler and the Python headers: optional, openum runs as pure Python without them).
# As root on Debian/Ubuntu it installs what is missing with apt-get; otherwise it prints exactly what
# to install and exits 1 when something required is missing.
set -u

missing_pkgs=()
need() {  # need COMMAND DEBIAN_PACKAGE
  command -v "$1" >/dev/null 2>&1 || missing_pkgs+=("$2")
}

java_ok() {
  command -v java >/dev/null 2>&1 || return 1
  local v
  v=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
  [ -n "$v" ] && [ "$v" -ge 17 ]
}

# Optional: without them `pip install` builds openum as pure Python (same behaviour, slower hot paths).
optional_pkgs=()
PYTHON_FOR_HEADERS="${PYTHON:-python3}"
compiler_check() {
  command -v gcc >/dev/null 2>&1 || command -v cc >/dev/null 2>&1 || optional_pkgs+=("gcc")
  "$PYTHON_FOR_HEADERS" -c 'import os, sys, sysconfig
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)' 2>/dev/null \
    || optional_pkgs+=("python3-dev")
}

mode="${1:-all}"
case "$mode" in
  java) java_ok || missing_pkgs+=("openjdk-17-jre-headless") ;;  # what make run needs (Spark)
  compiler) compiler_check ;;
  *)
    java_ok || missing_pkgs+=("openjdk-17-jre-headless")
    need tshark tshark
    need iptables iptables
    need ip iproute2
    compiler_check
    ;;
esac

if [ ${#optional_pkgs[@]} -gt 0 ] && { [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; }; then
  echo "system-deps: no ${optional_pkgs[*]}: openum's hot paths will run as pure Python (slower);" \
    "to compile them: sudo apt-get install -y ${optional_pkgs[*]}" >&2
  optional_pkgs=()
fi
if [ ${#optional_pkgs[@]} -gt 0 ]; then
  echo "system-deps: installing ${optional_pkgs[*]} (apt-get; optional: compiles openum's hot paths)"
  export DEBIAN_FRONTEND=noninteractive
  if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${optional_pkgs[@]}"; } \
      >/tmp/openum-apt-optional.log 2>&1; then
    echo "system-deps: could not install ${optional_pkgs[*]} (see /tmp/openum-apt-optional.log);" \
      "openum's hot paths will run as pure Python" >&2
  fi
fi

if [ ${#missing_pkgs[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "system-deps: installing ${missing_pkgs[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  # wireshark-common asks whether non-root users may capture; answer "no" without a prompt.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections 2>/dev/null || true
  if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing_pkgs[@]}"; } >/tmp/openum-apt.log 2>&1; then
    echo "system-deps: apt-get failed; see /tmp/openum-apt.log" >&2
    tail -n 20 /tmp/openum-apt.log >&2
    exit 1
  fi
  exit 0
fi

echo "system-deps: missing system packages: ${missing_pkgs[*]}" >&2
echo "system-deps: install them with:  sudo apt-get install -y ${missing_pkgs[*]}" >&2
echo "system-deps: (or run 'make test' or 'make run' as root on Debian, which installs them)" >&2
exit 1
