#!/usr/bin/env bash
# gen_criteo's promises on small files: same seed and flags, same bytes; 40
# tab-separated fields of the right shapes; --bytes stops at the first line
# that reaches the size; bad flags exit 2; a positive share near 25.6 % and a
# bayes_auc line. And vw_tools.py convert on a line written by hand.
set -euo pipefail
gen="$(readlink -f "$1")"
tools="$(readlink -f "$2")"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$gen" --out "$dir/a" --rows 3000 --test_out "$dir/at" --test_rows 2000 \
  --seed 7 > "$dir/a.out"
"$gen" --out "$dir/b" --rows 3000 --test_out "$dir/bt" --test_rows 2000 \
  --seed 7 > /dev/null
cmp -s "$dir/a" "$dir/b" || fail "same seed, different train files"
cmp -s "$dir/at" "$dir/bt" || fail "same seed, different test files"
cmp -s "$dir/a" "$dir/at" && fail "train and test streams are the same"
"$gen" --out "$dir/c" --rows 3000 --test_rows 10 --seed 8 > /dev/null
cmp -s "$dir/a" "$dir/c" && fail "seeds 7 and 8 give the same file"
[ "$(wc -l < "$dir/a")" -eq 3000 ] || fail "--rows 3000 wrote $(wc -l < "$dir/a") lines"

bad=$(awk -F'\t' 'NF != 40 || $1 !~ /^[01]$/ { n++; next }
  { for (i = 2; i <= 14; i++) if ($i !~ /^(-?[0-9]+)?$/) n++
    for (i = 15; i <= 40; i++)
      if ($i != "" && ($i !~ /^[0-9a-f]+$/ || length($i) != 8)) n++ }
  END { print n + 0 }' "$dir/a" "$dir/at")
[ "$bad" -eq 0 ] || fail "$bad malformed fields or lines"
share=$(awk -F'\t' '{ p += $1 } END { print p / NR }' "$dir/a")
awk "BEGIN { exit !($share > 0.2 && $share < 0.31) }" ||
  fail "positive share $share"
grep -Eq '^bayes_auc 0\.[6-9][0-9]+$' "$dir/a.out" || fail "no bayes_auc: $(cat "$dir/a.out")"

"$gen" --out "$dir/d" --bytes 100K --test_rows 10 > /dev/null
size=$(stat -c %s "$dir/d")
last=$(tail -n 1 "$dir/d" | wc -c)
[ "$size" -ge 102400 ] && [ $((size - last)) -lt 102400 ] ||
  fail "--bytes 100K wrote $size bytes (last line $last)"
for args in "--out $dir/e --bytes 4Q" "--out $dir/e" "--rows 5" \
  "--out $dir/e --rows 5 --test_rows 0"; do
  rc=0
  "$gen" $args > /dev/null 2>&1 || rc=$?
  [ "$rc" -eq 2 ] || fail "gen_criteo $args exited $rc, not 2"
done

printf '1\t\t-1\t3\t100\t\t\t\t\t\t\t\t\t0\tabcdef01%s\n' \
  "$(printf '\t%.0s' $(seq 2 25))	0123abcd" > "$dir/hand"
/usr/bin/python3 "$tools" convert "$dir/hand" "$dir/hand.vw"
want="1 |f I2_-1 I3_1 I4_21 I13_0 C1_abcdef01 C26_0123abcd"
[ "$(cat "$dir/hand.vw")" = "$want" ] ||
  fail "convert gave '$(cat "$dir/hand.vw")', want '$want'"
echo PASS
