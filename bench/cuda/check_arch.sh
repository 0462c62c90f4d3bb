#!/usr/bin/env bash
# Compiles every src/cuda/*.cu for another GPU architecture (default sm_80), from the flags a
# configured build-cuda records in compile_commands.json, without the sm_90a define: the check
# that the portable paths (no wgmma, TMA or setmaxnreg) still build where CI builds only sm_90a.
#   bash bench/cuda/check_arch.sh [arch]      # e.g. 80, 86, 89, 90
# Objects and logs go to $CHECK_DIR (default /tmp/quanta_arch_<arch>); exits non-zero on the
# first file that fails, naming it. ~35 minutes for sm_80 on the 2-core dev machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
arch=${1:-80}
dir=${CHECK_DIR:-/tmp/quanta_arch_$arch}
mkdir -p "$dir"
python3 - "$arch" "$dir" >"$dir/commands.txt" <<'EOF'
import json, sys
arch, out = sys.argv[1], sys.argv[2]
for e in json.load(open('build-cuda/compile_commands.json')):
    f = e['file']
    if '/src/cuda/' not in f or not f.endswith('.cu'):
        continue
    c = e['command'].replace('-DQUANTA_CUDA_SM90A=1', '')
    c = c.replace('arch=compute_90a,code=[compute_90a,sm_90a]', f'arch=compute_{arch},code=[sm_{arch}]')
    name = f.split('/')[-1]
    print(f"cd {e['directory']} && {c.split(' -o ')[0]} -o {out}/{name}.o > {out}/{name}.log 2>&1"
          f" || {{ echo 'sm_{arch}: {name} failed, see {out}/{name}.log'; exit 255; }}")
EOF
n=$(wc -l <"$dir/commands.txt")
echo "compiling $n files for sm_$arch into $dir"
tr '\n' '\0' <"$dir/commands.txt" | xargs -0 -P"$(nproc)" -I{} sh -c '{}'
echo "sm_$arch: all $n files compile"
