#!/usr/bin/env bash
# On the GPU machine: bench/bench_doctor.py over the image's own Python environment (doctor cold
# and warm against `ldd -r` over every ELF file of its site directories, and peak memory).
#
# There is no network there: abifit's dependencies travel as wheels in `.whl/` of the checkout
# (carried with the working tree), made here with
#   pip download -d .whl --no-deps --python-version 3.12 --platform manylinux_2_28_x86_64 \
#     --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --only-binary=:all: \
#     platformdirs tomli_w backports.zstd resolvelib msgpack packaging urllib3
# They are installed into the image's Python (the machine is discarded afterwards), so that the
# environment doctor reads is the one ldd reads: nothing on PYTHONPATH.
#
#   bash bench/device/doctor_image.sh   # writes $OUT/doctor.json and $OUT/doctor.log
set -euo pipefail
cd "$(dirname "$0")/../.."
python3 -m pip install -q --no-deps --break-system-packages .whl/*.whl 2>/dev/null \
  || python3 -m pip install -q --no-deps .whl/*.whl
nproc
python3 bench/bench_doctor.py --python "$(command -v python3)" --repeat "${REPEAT:-3}" \
  >"$OUT/doctor.json" 2>"$OUT/doctor.log" || { tail -20 "$OUT/doctor.log"; exit 1; }
tail -4 "$OUT/doctor.log"
