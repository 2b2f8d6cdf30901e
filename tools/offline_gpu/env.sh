export PYTHONPATH=/tmp/site:$PWD HYBRIDLIB_CACHE=/tmp/hlcache HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
# CPU threads per process: the cores shared among the GPUs' queues (torch's default, a thread per core, in two
# queues at once oversubscribed the host on 2026-11-30: SoftCKA 150-270 s a model instead of 18-43 s)
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(($(nproc) / (gpus > 0 ? gpus : 1)))}
unset gpus
