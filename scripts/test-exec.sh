#!/usr/bin/env bash
# go test's -exec program for scripts/test.sh: runs the test binary go test
# built (`test-exec.sh a.out ARGS...`, in the package's folder), after
# keeping a hard link to it (a copy across file systems) when the package's
# folder, relative to TEST_EXEC_ROOT, is one of TEST_EXEC_KEEP (folders
# separated by spaces). The link goes into TEST_EXEC_DIR, named after the
# folder (internal/runs/dynamo: internal_runs_dynamo.test), so that the
# integration tier runs the binary the unit tier linked instead of linking it
# again. Without TEST_EXEC_DIR it only runs the binary.
set -euo pipefail
if [ -n "${TEST_EXEC_DIR:-}" ]; then
  here="$(pwd -P)"
  rel=.
  [ "$here" = "$TEST_EXEC_ROOT" ] || rel="${here#"$TEST_EXEC_ROOT"/}"
  case " ${TEST_EXEC_KEEP:-} " in
  *" $rel "*)
    keep="$TEST_EXEC_DIR/${rel//\//_}.test"
    ln -f "$1" "$keep" 2>/dev/null || cp "$1" "$keep"
    ;;
  esac
fi
exec "$@"
