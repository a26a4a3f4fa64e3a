#!/usr/bin/env bash
# Make sure the system programs the test suite uses are present:
#   java 17+ (Spark), tshark (wire conformance), iptables and ip (fault tests in network namespaces).
# With the argument 'java' it sees to Java alone (make run).
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

java_ok || missing_pkgs+=("openjdk-17-jre-headless")
if [ "${1:-all}" != "java" ]; then  # 'system-deps.sh java': only what make run needs (Spark)
  need tshark tshark
  need iptables iptables
  need ip iproute2
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
