#!/bin/bash
# Real GPU failures as most users paste them: torchrun's plain output (no --tee, no --log-dir), so a kernel's own
# printf line carries no rank prefix. Scenarios in plain_failures.py; usage (device tool): W=OUTDIR scripts/gpu/make_plain.sh
# writes W/<case>/{torchrun.log,cmd.txt} and $OUT/gpu_runs.tgz. Second run of 2026-11-27 (H200, torch 2.11, NCCL 2.28.9).
W=${W:-$OUT/runs}; mkdir -p "$W"; P=29600
run() {  # run CASE NPROC SCEN [ENV=V ...]
  local c=$1 n=$2 s=$3; shift 3; P=$((P+1)); mkdir -p "$W/$c"
  echo "== $c: nproc $n scen $s env $*" | tee "$W/$c/cmd.txt"
  ( cd "$W/$c" && env "$@" timeout -k 5 90 python3 -m torch.distributed.run --nnodes 1 --nproc-per-node "$n" \
      --master-addr 127.0.0.1 --master-port $P "$HERE/plain_failures.py" "$s" > torchrun.log 2>&1; echo "rc=$?" >> cmd.txt )
  tail -3 "$W/$c/torchrun.log"
}
HERE=$(cd "$(dirname "$0")" && pwd)
nvidia-smi -L; python3 -c "import torch;print(torch.__version__, torch.cuda.nccl.version())"
run oom_rank1 2 oom_rank1
run device_assert_rank1 2 device_assert_rank1
run illegal_address_rank1 2 illegal_address_rank1
run gpu_spin_gloo_timeout 2 gpu_spin_gloo_timeout SCEN_TIMEOUT=20
run invalid_ordinal 2 invalid_ordinal NCCL_DEBUG=WARN
run nccl_bad_ifname 1 nccl_one NCCL_DEBUG=WARN NCCL_SOCKET_IFNAME=ib_nonexistent0
run nccl_net_ib_missing 1 nccl_one NCCL_DEBUG=INFO NCCL_NET=IB
run nccl_bad_algo 1 nccl_one NCCL_DEBUG=WARN NCCL_ALGO=Bogus
run nccl_bad_proto 1 nccl_one NCCL_DEBUG=WARN NCCL_PROTO=NotAProto
run nccl_net_plugin_missing 1 nccl_one NCCL_DEBUG=INFO NCCL_NET_PLUGIN=/nonexistent/libnccl-net-missing.so NCCL_NET=Plugin
run nccl_cpu_tensor 1 nccl_cpu_tensor NCCL_DEBUG=WARN
run no_gpu_nccl 2 no_gpu_nccl CUDA_VISIBLE_DEVICES=
run oom_nccl_one 1 oom_nccl_one NCCL_DEBUG=WARN
# GPU state readings (issue 27 fixtures)
G=$W/gpu_state; mkdir -p $G
nvidia-smi > $G/nvidia-smi.txt 2>&1
nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER > $G/nvidia-smi-q-ecc.txt 2>&1
nvidia-smi topo -m > $G/nvidia-smi-topo.txt 2>&1
nvidia-smi --query-gpu=index,name,pci.bus_id,uuid,temperature.gpu,power.draw,ecc.errors.uncorrected.volatile.total,retired_pages.pending,remapped_rows.pending,remapped_rows.failure --format=csv > $G/query.csv 2>&1
(dmesg 2>&1 | tail -50) > $G/dmesg-tail.txt
python3 "$HERE/nvml.py" > $G/nvml.json 2>&1
cd "$W" && tar czf "$OUT/gpu_runs.tgz" . && ls -la "$OUT"
