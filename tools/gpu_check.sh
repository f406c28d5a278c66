#!/usr/bin/env bash
# The GPU checks, in one short run on a CUDA machine (the CI machine has none):
#   1. tests/test_gpu.py (CUDA NDArrays, Gluon training, GPU+CPU contexts, AMP float16,
#      hybridize, Module, NCCL and gloo over CUDA tensors, hvd.DistributedTrainer);
#   2. a slice of the CPU suite with the GPU visible (the code paths that look for CUDA);
#   3. bench/overhead.py on the GPU: mxtorch vs plain torch, float32 and AMP float16;
#   (GPU_CHECK_PROFILE=1) tools/gpu_profile.py: kernels, synchronisations and host time per step.
# GPU_CHECK_SLICE=0 / GPU_CHECK_BENCH=0 leave steps 2 / 3 out.
# Logs go to $OUT (when set) or ./gpu-check/.  Each step has its own time limit.
#   bash tools/gpu_check.sh [python]
set -u
PY=${1:-python3}
cd "$(dirname "$0")/.."
OUTDIR=${OUT:-gpu-check}
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}

nvidia-smi -L 2>&1 | head -2
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0), \
'nccl', torch.cuda.nccl.version())"

echo "== tests/test_gpu.py"
timeout 240 $PY -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py --timeout 150 -ra --show-capture=no 2>&1 \
    | tee "$OUTDIR/gpu_tests.log" | tail -40

if [ "${GPU_CHECK_PROFILE:-0}" = 1 ]; then
    echo "== tools/gpu_profile.py"
    timeout 150 $PY tools/gpu_profile.py --model mlp 2>&1 | tee "$OUTDIR/profile.log" | grep -v "^USDT"
    timeout 90 $PY tools/gpu_profile.py --model mlp --amp float16 --no-profile 2>&1 | tee -a "$OUTDIR/profile.log"
fi

[ "${GPU_CHECK_SLICE:-1}" = 1 ] && echo "== CPU suite slice with a GPU visible" && timeout 150 $PY -m pytest -q -p no:cacheprovider -x -n 12 --timeout 120 -m "not slow and not cluster" \
    tests/test_amp.py tests/test_context.py tests/test_kvstore_allreduce.py tests/test_horovod.py \
    tests/test_trainer.py tests/test_nd.py tests/test_ndarray_methods.py tests/test_block.py 2>&1 \
    | tee "$OUTDIR/cpu_slice.log" | tail -25

[ "${GPU_CHECK_BENCH:-1}" = 1 ] && echo "== bench/overhead.py on the GPU" && for amp in "" float16; do
    timeout 120 $PY bench/overhead.py --device cuda --models mlp,lenet --batch 256 --steps 40 --rounds 5 \
        ${amp:+--amp $amp} 2>&1 | tee -a "$OUTDIR/bench.log" | tail -6
done
