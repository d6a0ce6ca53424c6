#!/bin/bash
# tools/check-runpath.sh PATH... — every ELF file under the given files and
# folders (executables and shared objects) carries only absolute RUNPATH and
# RPATH entries, or ones starting with $ORIGIN. An empty entry (a leading,
# trailing or doubled ':') or a relative one is searched from the current
# directory, so a library in whatever folder gpurun is run from would be
# loaded: CMake made one once, padding the build tree's RUNPATH with ':'.
#
# Prints one line per file checked; exits 1 naming each bad entry, 2 when
# readelf is missing or no ELF file was found.
set -uo pipefail
command -v readelf >/dev/null || { echo "check-runpath: readelf (binutils) is not installed"; exit 2; }
[ $# -gt 0 ] || { echo "usage: tools/check-runpath.sh PATH..."; exit 2; }

checked=0 bad=0
while IFS= read -r -d '' file; do
  # ELF magic: \177ELF
  [ "$(head -c 4 "$file" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ] || continue
  checked=$((checked + 1))
  paths=$(readelf -d "$file" 2>/dev/null | sed -n 's/.*(\(RUNPATH\|RPATH\)).*\[\(.*\)\]$/\1=\2/p')
  if [ -z "$paths" ]; then
    echo "ok: $file (no RUNPATH)"
    continue
  fi
  file_bad=0
  while IFS= read -r entry_line; do
    kind=${entry_line%%=*}
    value=${entry_line#*=}
    case ":$value:" in
      *::*) echo "BAD: $file: $kind [$value] has an empty entry (the current directory)"; file_bad=1 ;;
    esac
    IFS=: read -r -a entries <<<"$value"
    for entry in "${entries[@]}"; do
      case "$entry" in
        '' | /* | '$ORIGIN' | '$ORIGIN/'* | '${ORIGIN}' | '${ORIGIN}/'*) ;;
        *) echo "BAD: $file: $kind [$value] has the relative entry '$entry'"; file_bad=1 ;;
      esac
    done
  done <<<"$paths"
  [ "$file_bad" -eq 0 ] && echo "ok: $file ($(tr '\n' ' ' <<<"$paths" | sed 's/ $//'))"
  bad=$((bad + file_bad))
done < <(find -H "$@" -type f \( -perm -u+x -o -name '*.so' -o -name '*.so.*' \) \
           -not -path '*/CMakeFiles/*' -print0)

echo "check-runpath: $checked ELF file(s), $bad with a bad entry"
[ "$checked" -gt 0 ] || exit 2
[ "$bad" -eq 0 ]
