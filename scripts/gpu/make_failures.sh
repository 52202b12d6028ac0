#!/bin/bash
# Real GPU failures for hangdbg's post-mortem readers (issue 26): each scenario runs under torchrun on one GPU
# and leaves what a user would attach: torchrun's output, torchrun's per-rank log dir (--log-dir, --tee 3) and
# NCCL_DEBUG files.  Usage: scripts/gpu/make_failures.sh OUTDIR   (writes OUTDIR/<scenario>/ and a tarball)
set -u
OUT_DIR=${1:?OUTDIR}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
mkdir -p "$OUT_DIR"
run() {  # run NAME NPROC MODE [ENV=VAL...]
    local name=$1 nproc=$2 mode=$3; shift 3
    local d="$OUT_DIR/$name"; mkdir -p "$d"
    echo "== $name ($nproc ranks, $mode, $*)"
    ( cd "$d" && env NCCL_DEBUG=INFO NCCL_DEBUG_FILE="$d/nccl.%h.%p.log" "$@" \
        timeout -s INT 150 "$PY" -m torch.distributed.run --standalone --nproc-per-node "$nproc" \
        --log-dir "$d/torchrun-logs" --tee 3 "$HERE/failures.py" "$mode" > "$d/torchrun.log" 2>&1 ; echo "exit $?" > "$d/exit_status" )
    cat "$d/exit_status"; tail -n 3 "$d/torchrun.log"
}
nvidia-smi -L > "$OUT_DIR/nvidia-smi-L.txt" 2>&1
run cuda_oom_rank1 2 cuda_oom_rank1
run invalid_ordinal_2ranks_1gpu 2 invalid_ordinal
run device_assert_rank1 2 device_assert_rank1
run illegal_address_rank1 2 illegal_address_rank1
run nccl_init_gpu_full 1 nccl_init_gpu_full
run nccl_socket_ifname_missing 1 nccl_env NCCL_SOCKET_IFNAME=nosuchif0
run nccl_net_ib_missing 1 nccl_env NCCL_NET=IB
run nccl_proto_bogus 1 nccl_env NCCL_PROTO=Bogus
run nccl_socket_ifname_missing_nodebug 1 nccl_env NCCL_SOCKET_IFNAME=nosuchif0 NCCL_DEBUG=
run no_gpu_visible 2 no_gpu_visible CUDA_VISIBLE_DEVICES=
tar czf "$OUT_DIR.tgz" -C "$(dirname "$OUT_DIR")" "$(basename "$OUT_DIR")"
ls -la "$OUT_DIR.tgz"
