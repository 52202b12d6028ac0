"""Write hangdbg/catalog/data/pytorch_refusals.toml and frameworks_refusals.toml: the frameworks' own refusals of a
configuration or a call, read from their released packages.

Each pick below was chosen by hand among the raise / assert / ``_log_and_throw`` sites of a release whose text the
catalog did not read yet (internal checks and "this is a bug" asserts left out) and classified by hand: ``launch``
(the launch settings, the config file or the code asked for something the framework refuses) or ``environment`` (a
package, version or device capability the machine lacks). Either way the same code fails on every rank, so no rank
is blamed. This script finds each pick's text at its raise site in the release (Python's ``ast``: the line of the
string literal) and writes the citation ``owner/repo TAG path:LINE``; a pick whose text is not at a raise site of its
file is an error. It reads, never runs, upstream code: the installed torch package (torch 2.13.0, the project's pin)
and the released wheels / sdist of the others::

    pip download --no-deps accelerate==1.15.0 deepspeed==0.19.8 lightning==2.6.6 transformers==5.24.0 -d WHEELS
    pip download --no-deps --only-binary :all: --python-version 3.12 --platform manylinux1_x86_64 vllm==0.11.2 -d WHEELS
    python scripts/catalog/mine_refusals.py --wheels WHEELS [--check] [--out hangdbg/catalog/data]

Then run scripts/catalog/json_twin.py. Stdlib only.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import re
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# framework -> (cited repository, tag, repo path prefix -> package path prefix, package file name pattern, name)
RELEASES = {
    "torch": ("pytorch/pytorch", "v2.13.0", ("torch/", "torch/"), None, "torch.distributed"),
    "accelerate": ("huggingface/accelerate", "v1.15.0", ("src/accelerate/", "accelerate/"), "accelerate-1.15.0-*.whl",
                   "Accelerate"),
    "deepspeed": ("deepspeedai/DeepSpeed", "v0.19.8", ("deepspeed/", "deepspeed-0.19.8/deepspeed/"),
                  "deepspeed-0.19.8.tar.gz", "DeepSpeed"),
    "lightning": ("Lightning-AI/pytorch-lightning", "2.6.6", ("src/lightning/", "lightning/"), "lightning-2.6.6-*.whl",
                  "Lightning"),
    "vllm": ("vllm-project/vllm", "v0.11.2", ("vllm/", "vllm/"), "vllm-0.11.2-*.whl", "vLLM"),
    "transformers": ("huggingface/transformers", "v5.24.0", ("src/transformers/", "transformers/"),
                     "transformers-5.24.0-*.whl", "transformers"),
}

MEANING = {
    ("torch", "launch"): "torch.distributed refused how the program called it ({fn}): a mistake in the code or its "
                         "launch settings, the same on every rank that runs this code",
    ("torch", "environment"): "this PyTorch build or machine lacks what the program asked torch.distributed for "
                              "({fn}): the installation, not a rank",
    ("accelerate", "launch"): "Accelerate refused the run's configuration or how the program called it: a mistake in "
                              "the launch settings, the config file or the code, the same on every rank",
    ("accelerate", "environment"): "Accelerate found that a package, version or device capability it needs is missing "
                                   "on this machine: the installation or the hardware, the same on every rank",
    ("deepspeed", "launch"): "DeepSpeed refused the run's configuration or how the program called it: a mistake in "
                             "the launch settings, the config file or the code, the same on every rank",
    ("deepspeed", "environment"): "DeepSpeed found that a package, version or device capability it needs is missing "
                                  "on this machine: the installation or the hardware, the same on every rank",
    ("lightning", "launch"): "Lightning refused the Trainer's configuration or how it was launched: a mistake in the "
                             "launch settings or the code, the same on every rank",
    ("lightning", "environment"): "Lightning found that a package, version or platform feature it needs is missing on "
                                  "this machine: the installation, the same on every rank",
    ("vllm", "launch"): "vLLM refused the engine's configuration (parallel sizes, model, scheduler or load settings): "
                        "a mistake in the launch arguments, the same on every worker",
    ("vllm", "environment"): "vLLM found that this machine lacks what the configuration needs (a package, a platform "
                             "feature, a GPU capability): the installation or the hardware, the same on every worker",
    ("transformers", "launch"): "transformers refused the Trainer's or the model's set-up for this run (training "
                                "arguments, FSDP/DeepSpeed flags, the model's placement): a mistake in the launch "
                                "settings or the code, the same on every rank",
    ("transformers", "environment"): "transformers found that this machine lacks what the run needs (a package "
                                     "version, a GPU or its capability): the installation or the hardware, the same "
                                     "on every rank",
}
ACTION = {
    ("torch", "launch"): "change the call or the launch settings as the message says; the same code runs on every "
                         "rank, so no rank is at fault",
    ("torch", "environment"): "install a PyTorch build with that backend or accelerator support, or use a backend "
                              "this build has (nccl, gloo)",
    ("lightning", "launch"): "change the Trainer argument or the launch as the message says; the same configuration "
                             "runs on every rank, so no rank is at fault",
    ("lightning", "environment"): "install or update the package it names, or choose a setting this machine supports",
    ("vllm", "launch"): "change the engine argument as the message says (vllm serve / LLM(...) options); no worker is "
                        "at fault",
    ("vllm", "environment"): "install what it names, or choose a setting this machine supports",
    ("transformers", "launch"): "change the training argument or the code as the message says; the same "
                                "configuration runs on every rank, so no rank is at fault",
    ("transformers", "environment"): "install what it names, or choose a setting this machine supports",
}
for _fw in ("accelerate", "deepspeed"):
    ACTION[(_fw, "launch")] = ("change the setting or the call as the message says; the same configuration runs on "
                               "every rank, so no rank is at fault")
    ACTION[(_fw, "environment")] = ("install or update the package it names, or change the setting that needs the "
                                    "missing capability")

SPECIAL = {  # picks whose meaning says more than their family's
    'pytorch.c10d-usage-distributeddataparallel-s-input-module-must-be':
        'the module wrapped in DDP has parameters on different kinds of device (some on the CPU, some on a GPU)',
    'pytorch.c10d-usage-distributeddataparallel-device-ids-and-output-device':
        'device_ids/output_device were given for a module that is not on one GPU (a CPU module, or one spread over several devices)',
    'pytorch.c10d-usage-modules-with-uninitialized-parameters-can-t':
        'the module wrapped in DDP still has lazy (uninitialized) parameters: run one forward pass before wrapping it',
    'pytorch.c10d-usage-local-rank-is-not-in-the':
        'the process was not started by a launcher that sets LOCAL_RANK (torchrun does; plain python or mpirun does not)',
    'pytorch.c10d-usage-default-backend-not-registered-for-device':
        'a collective got a tensor on a device the process group has no backend for (most often a CPU tensor on a group created with the NCCL backend only)',
    'pytorch.c10d-usage-monitored-barrier-is-only-implemented-for':
        'monitored_barrier was called on a process group whose backend is not gloo',
    'pytorch.c10d-usage-device-id-is-out-of-range':
        'init_process_group was given a device index beyond the GPUs this process sees (more ranks per node than GPUs, or CUDA_VISIBLE_DEVICES hides them)',
}

# (framework, entry id, file as cited, the message's text as the raise site writes it (f-string fields as {}), blame)
PICKS: list[tuple[str, str, str, str, str]] = [
    ('torch', 'pytorch.c10d-usage-cannot-specify-both-process-group-and', 'torch/nn/parallel/distributed.py', 'Cannot specify both process_group and device_mesh arguments.', 'launch'),
    ('torch', 'pytorch.c10d-usage-device-ids-can-only-be-none', 'torch/nn/parallel/distributed.py', 'device_ids can only be None or contain a single element.', 'launch'),
    ('torch', 'pytorch.c10d-usage-distributeddataparallel-s-input-module-must-be', 'torch/nn/parallel/distributed.py', "DistributedDataParallel's input module must be on the same type of devices, but input module parameters locate in {}.", 'launch'),
    ('torch', 'pytorch.c10d-usage-ddp-pickling-unpickling-are-only-supported', 'torch/nn/parallel/distributed.py', 'DDP Pickling/Unpickling are only supported when using DDP with the default process group. That is, when you have called init_process_group and have not passed process_group argument to DDP constructor', 'launch'),
    ('torch', 'pytorch.c10d-usage-distributeddataparallel-device-ids-and-output-device', 'torch/nn/parallel/distributed.py', 'DistributedDataParallel device_ids and output_device arguments only work with single-device/multiple-device GPU modules or CPU modules, but got device_ids {}, output_device {}, and module parameters {}.', 'launch'),
    ('torch', 'pytorch.c10d-usage-modules-with-uninitialized-parameters-can-t', 'torch/nn/parallel/distributed.py', "Modules with uninitialized parameters can't be used with `DistributedDataParallel`. Run a dummy forward pass to correctly initialize the modules", 'launch'),
    ('torch', 'pytorch.c10d-usage-bf-all-reduce-communication-hook-required', 'torch/nn/parallel/distributed.py', 'BF16 all reduce communication hook required CUDA 11+ and NCCL 2.10+ or XPU and XCCL', 'environment'),
    ('torch', 'pytorch.c10d-usage-syncbatchnorm-layers-only-work-with-gpu', 'torch/nn/parallel/distributed.py', 'SyncBatchNorm layers only work with GPU modules', 'launch'),
    ('torch', 'pytorch.c10d-usage-group-rank-is-not-part-of', 'torch/distributed/distributed_c10d.py', 'Group rank {} is not part of group {}', 'launch'),
    ('torch', 'pytorch.c10d-usage-local-rank-is-not-in-the', 'torch/distributed/distributed_c10d.py', 'LOCAL_RANK is not in the environment. Consider passing fallback_rank to allow `get_node_local_rank` to work, assuming you are not running in a multi-device context and want the code to run locally instead.', 'launch'),
    ('torch', 'pytorch.c10d-usage-unknown-backend-specify-a-device-backend', 'torch/distributed/distributed_c10d.py', "Unknown backend '{}'. Specify a 'device:backend' string or use one of: {}", 'launch'),
    ('torch', 'pytorch.c10d-usage-expected-timeout-argument-to-be-of', 'torch/distributed/distributed_c10d.py', 'Expected timeout argument to be of type datetime.timedelta, got {}', 'launch'),
    ('torch', 'pytorch.c10d-usage-group-is-not-registered-please-create', 'torch/distributed/distributed_c10d.py', 'Group {} is not registered, please create group with torch.distributed.new_group API', 'launch'),
    ('torch', 'pytorch.c10d-usage-global-rank-is-not-part-of', 'torch/distributed/distributed_c10d.py', 'Global rank {} is not part of group {}', 'launch'),
    ('torch', 'pytorch.c10d-usage-invalid-rank-rank-should-not-be', 'torch/distributed/distributed_c10d.py', 'Invalid {} rank: {} rank should not be the same as the rank of the current process.', 'launch'),
    ('torch', 'pytorch.c10d-usage-invalid-process-group-specified', 'torch/distributed/distributed_c10d.py', 'Invalid process group specified', 'launch'),
    ('torch', 'pytorch.c10d-usage-default-backend-not-registered-for-device', 'torch/distributed/distributed_c10d.py', 'Default backend not registered for device : {}', 'launch'),
    ('torch', 'pytorch.c10d-usage-cannot-specify-both-init-method-and', 'torch/distributed/distributed_c10d.py', 'Cannot specify both init_method and store.', 'launch'),
    ('torch', 'pytorch.c10d-usage-the-specified-group-name-has-already', 'torch/distributed/distributed_c10d.py', 'The specified group name has already been created, please use a different group name', 'launch'),
    ('torch', 'pytorch.c10d-usage-init-process-group-device-id-parameter', 'torch/distributed/distributed_c10d.py', 'init_process_group device_id parameter must be an accelerator with an index', 'launch'),
    ('torch', 'pytorch.c10d-usage-invalid-process-group-specified-or-has', 'torch/distributed/distributed_c10d.py', 'Invalid process group specified or has been destroyed.', 'launch'),
    ('torch', 'pytorch.c10d-usage-all-reduce-does-not-support-on', 'torch/distributed/distributed_c10d.py', 'all_reduce does not support {} on complex tensors', 'launch'),
    ('torch', 'pytorch.c10d-usage-must-provide-object-gather-list-on', 'torch/distributed/distributed_c10d.py', 'Must provide object_gather_list on dst rank', 'launch'),
    ('torch', 'pytorch.c10d-usage-monitored-barrier-is-only-implemented-for', 'torch/distributed/distributed_c10d.py', 'monitored_barrier is only implemented for GLOO backend.', 'launch'),
    ('torch', 'pytorch.c10d-usage-processgroupwrapper-unsupported-without-gloo-backend', 'torch/distributed/distributed_c10d.py', 'ProcessGroupWrapper unsupported without GLOO backend.', 'environment'),
    ('torch', 'pytorch.c10d-usage-the-arg-group-size-must-not', 'torch/distributed/distributed_c10d.py', "The arg 'group_size' ({}) must not exceed the world size ({})", 'launch'),
    ('torch', 'pytorch.c10d-usage-the-world-size-must-be-divisible', 'torch/distributed/distributed_c10d.py', "The world size ({}) must be divisible by 'group_size={}'", 'launch'),
    ('torch', 'pytorch.c10d-usage-world-size-must-be-positive-if', 'torch/distributed/distributed_c10d.py', 'world_size must be positive if using store', 'launch'),
    ('torch', 'pytorch.c10d-usage-rank-must-be-non-negative-if', 'torch/distributed/distributed_c10d.py', 'rank must be non-negative if using store', 'launch'),
    ('torch', 'pytorch.c10d-usage-device-id-is-an-int-but', 'torch/distributed/distributed_c10d.py', 'device_id is an int, but no accelerator support is found from the current compilation. Please use a different compiled version that supports your accelerator.', 'environment'),
    ('torch', 'pytorch.c10d-usage-device-id-does-not-match-the', 'torch/distributed/distributed_c10d.py', "device_id {} does not match the current compilation's accelerator support: {}. Please use a different compiled version that supports your accelerator.", 'environment'),
    ('torch', 'pytorch.c10d-usage-device-id-is-out-of-range', 'torch/distributed/distributed_c10d.py', 'device_id {} is out of range. Please use a device index less than the number of accelerators available: {}.', 'launch'),
    ('torch', 'pytorch.c10d-usage-unknown-backend-type', 'torch/distributed/distributed_c10d.py', 'Unknown backend type {}', 'launch'),
    ('torch', 'pytorch.c10d-usage-coalescing-manager-requires-all-collectives-to', 'torch/distributed/distributed_c10d.py', 'Coalescing manager requires all collectives to be the same type, but got mixed types: {}', 'launch'),
    ('torch', 'pytorch.c10d-usage-argument-gather-list-must-be-specified', 'torch/distributed/distributed_c10d.py', 'Argument ``gather_list`` must be specified on destination rank.', 'launch'),
    ('torch', 'pytorch.c10d-usage-argument-gather-list-must-not-be', 'torch/distributed/distributed_c10d.py', 'Argument ``gather_list`` must NOT be specified on non-destination ranks.', 'launch'),
    ('torch', 'pytorch.c10d-usage-argument-scatter-list-must-be-specified', 'torch/distributed/distributed_c10d.py', 'Argument ``scatter_list`` must be specified on source rank.', 'launch'),
    ('torch', 'pytorch.c10d-usage-argument-scatter-list-must-not-be', 'torch/distributed/distributed_c10d.py', 'Argument ``scatter_list`` must NOT be specified on non-source ranks.', 'launch'),
    ('torch', 'pytorch.c10d-usage-ranks-list-must-not-contain-duplicate', 'torch/distributed/distributed_c10d.py', 'ranks list must not contain duplicate entries, got {}', 'launch'),
    ('torch', 'pytorch.c10d-usage-the-new-group-s-world-size', 'torch/distributed/distributed_c10d.py', "the new group's world size should be less or equal to the world size set by init_process_group", 'launch'),
    ('torch', 'pytorch.c10d-usage-rank-is-out-of-range-valid', 'torch/distributed/distributed_c10d.py', 'Rank {} is out of range. Valid ranks are 0 to {} (world_size={})', 'launch'),
    ('torch', 'pytorch.c10d-usage-we-detected-accelerator-on-your-machine', 'torch/distributed/distributed_c10d.py', "We detected accelerator {} on your machine. But we don't know which communication backend to use for this accelerator. Please specify the `backend` argument in the `init_process_group` call.", 'environment'),
    ('torch', 'pytorch.c10d-usage-distributed-package-doesn-t-have-mpi', 'torch/distributed/distributed_c10d.py', "Distributed package doesn't have MPI built in. MPI is only included if you build PyTorch from source on a host that has MPI installed.", 'environment'),
    ('torch', 'pytorch.c10d-usage-distributed-package-doesn-t-have-gloo', 'torch/distributed/distributed_c10d.py', "Distributed package doesn't have Gloo built in", 'environment'),
    ('torch', 'pytorch.c10d-usage-distributed-package-doesn-t-have-xccl', 'torch/distributed/distributed_c10d.py', "Distributed package doesn't have XCCL built in", 'environment'),
    ('accelerate', 'frameworks.accelerate.usage-the-partialstate-or-accelerator-must-be-initialized', 'src/accelerate/state.py', 'The `PartialState` or `Accelerator` must be initialized before calling this function.', 'launch'),
    ('accelerate', 'frameworks.accelerate.usage-please-make-sure-to-properly-initialize-your', 'src/accelerate/state.py', 'Please make sure to properly initialize your accelerator via `accelerator = Accelerator()` before using any functionality from the `accelerate` library.', 'launch'),
    ('accelerate', 'frameworks.accelerate.usage-using-rtx-4000-series-doesn-t-support', 'src/accelerate/state.py', 'Using RTX 4000 series doesn\'t support faster communication broadband via P2P or IB. Please set `NCCL_P2P_DISABLE="1"` and `NCCL_IB_DISABLE="1" or use `accelerate launch` which will do this automatically.', 'environment'),
    ('accelerate', 'frameworks.accelerate.usage-using-fp8-precision-requires-transformer-engine-or', 'src/accelerate/state.py', 'Using `fp8` precision requires `transformer_engine` or `MS-AMP` to be installed.', 'environment'),
    ('accelerate', 'frameworks.accelerate.usage-deepspeed-is-not-available-install-it-using', 'src/accelerate/state.py', 'DeepSpeed is not available => install it using `pip3 install deepspeed` or build it from source', 'environment'),
    ('accelerate', 'frameworks.accelerate.usage-you-can-t-train-a-model-that', 'src/accelerate/accelerator.py', "You can't train a model that has been loaded with `device_map='auto'` in any distributed mode. Please rerun your script specifying `--num_processes=1` or by launching with `python {{myscript.py}}`.", 'launch'),
    ('accelerate', 'frameworks.accelerate.usage-unknown-mixed-precision-mode-choose-between', 'src/accelerate/accelerator.py', 'Unknown mixed_precision mode: {}. Choose between {}', 'launch'),
    ('accelerate', 'frameworks.accelerate.usage-deepspeed-is-not-installed-run-pip-install', 'src/accelerate/accelerator.py', 'DeepSpeed is not installed => run `pip install deepspeed` or build it from source.', 'environment'),
    ('accelerate', 'frameworks.accelerate.usage-megatron-is-not-installed-please-build-it', 'src/accelerate/accelerator.py', 'Megatron is not installed. please build it from source.', 'environment'),
    ('accelerate', 'frameworks.accelerate.usage-fp16-mixed-precision-requires-a-device-in', 'src/accelerate/accelerator.py', 'fp16 mixed precision requires a device in {} (not {}).', 'launch'),
    ('accelerate', 'frameworks.accelerate.usage-the-model-and-the-optimizer-parameters-are', 'src/accelerate/accelerator.py', 'The model and the optimizer parameters are not on the same device, which probably means you created an optimizer around your model **before** putting on the device. Make sure the line model.to(device) is before the optimizer creation in your script or remove it entirely and use the flag default value for `device_placement` in your `Accelerator` to let it handle that part for you.', 'launch'),
    ('accelerate', 'frameworks.accelerate.usage-you-can-t-train-a-model-that-2', 'src/accelerate/accelerator.py', "You can't train a model that has been loaded in 8-bit or 4-bit precision on multiple devices in any distributed mode. In order to use 8-bit or 4-bit models that have been loaded across multiple GPUs the solution is to use Naive Pipeline Parallelism. Therefore you should not specify that you are under any distributed regime in your accelerate config.", 'launch'),
    ('accelerate', 'frameworks.accelerate.usage-you-can-t-train-a-model-that-3', 'src/accelerate/accelerator.py', "You can't train a model that has been loaded in 8-bit or 4-bit precision with CPU or disk offload. If you want train the 8-bit or 4-bit model in CPU, please install bitsandbytes with multi-backend, see https://huggingface.co/docs/bitsandbytes/main/en/installation#multi-backend", 'launch'),
    ('accelerate', 'frameworks.accelerate.usage-when-using-deepspeed-accelerate-prepare-requires-you', 'src/accelerate/accelerator.py', "When using DeepSpeed, `accelerate.prepare()` requires you to pass at least one of training or evaluation dataloaders with `batch_size` attribute returning an integer value or alternatively set an integer value in `train_micro_batch_size_per_gpu` in the deepspeed config file or assign integer value to `AcceleratorState().deepspeed_plugin.deepspeed_config['train_micro_batch_size_per_gpu']`.", 'launch'),
    ('accelerate', 'frameworks.accelerate.usage-you-cannot-specify-an-optimizer-in-the', 'src/accelerate/accelerator.py', 'You cannot specify an optimizer in the config file and in the code at the same time. Please remove the optimizer from the config file or create `accelerate.utils.DummyOptim` in the code.', 'launch'),
    ('accelerate', 'frameworks.accelerate.usage-you-cannot-specify-a-scheduler-in-the', 'src/accelerate/accelerator.py', 'You cannot specify a scheduler in the config file and in the code at the same time. Please remove the scheduler from the config file or create `accelerate.utils.DummyScheduler` in the code.', 'launch'),
    ('accelerate', 'frameworks.accelerate.usage-bf16-mixed-precision-requires-pytorch-1-10', 'src/accelerate/accelerator.py', 'bf16 mixed precision requires PyTorch >= 1.10 and a supported device.', 'environment'),
    ('accelerate', 'frameworks.accelerate.usage-your-model-contains-dtensor-parameters-which-is', 'src/accelerate/accelerator.py', "Your model contains `DTensor` parameters, which is incompatible with DDP. Maybe you loaded your model with `device_map='auto'`? Specify `device_map='cuda'` or 'xpu' or 'cpu' instead.", 'launch'),
    ('accelerate', 'frameworks.accelerate.usage-at-least-one-of-the-dataloaders-passed', 'src/accelerate/accelerator.py', "At least one of the dataloaders passed to `accelerate.prepare()` has `None` as batch size. Please set an integer value in `train_micro_batch_size_per_gpu` in the deepspeed config file or assign integer value to `AcceleratorState().deepspeed_plugin.deepspeed_config['train_micro_batch_size_per_gpu']`.", 'launch'),
    ('accelerate', 'frameworks.accelerate.usage-cannot-get-16bit-model-weights-because-stage3', 'src/accelerate/accelerator.py', 'Cannot get 16bit model weights because `stage3_gather_16bit_weights_on_model_save` in DeepSpeed config is False. To save the model weights in 16bit, set `stage3_gather_16bit_weights_on_model_save` to True in DeepSpeed config file or set `zero3_save_16bit_model` to True when using `accelerate config`. To save the full checkpoint, run `model.save_checkpoint(save_dir)` and use `zero_to_fp32.py` to recover weights.', 'launch'),
    ('accelerate', 'frameworks.accelerate.usage-deepspeed-version-must-be-0-9-3', 'src/accelerate/accelerator.py', 'DeepSpeed version must be >= 0.9.3. Please update DeepSpeed.', 'environment'),
    ('accelerate', 'frameworks.accelerate.usage-deepspeed-is-not-installed-run-pip3-install', 'src/accelerate/commands/launch.py', 'DeepSpeed is not installed => run `pip3 install deepspeed` or build it from source.', 'environment'),
    ('accelerate', 'frameworks.accelerate.usage-your-training-script-should-have-a-function', 'src/accelerate/commands/launch.py', 'Your training script should have a function named {}, or you should pass a different value to `--main_training_function`.', 'launch'),
    ('accelerate', 'frameworks.accelerate.usage-less-than-two-gpu-ids-were-configured', 'src/accelerate/commands/launch.py', "Less than two GPU ids were configured and tried to run on multiple GPUs. Please ensure at least two are specified for `--gpu_ids`, or use `--gpu_ids='all'`.", 'launch'),
    ('accelerate', 'frameworks.accelerate.usage-unknown-mixed-precision-mode-choose-between-2', 'src/accelerate/launchers.py', 'Unknown mixed_precision mode: {}. Choose between {}.', 'launch'),
    ('accelerate', 'frameworks.accelerate.usage-to-train-on-tpu-in-colab-or', 'src/accelerate/launchers.py', 'To train on TPU in Colab or Kaggle Kernel, the `Accelerator` should only be initialized inside your training function. Restart your notebook and make sure no cells initializes an `Accelerator`.', 'launch'),
    ('accelerate', 'frameworks.accelerate.usage-to-launch-a-multi-device-training-from', 'src/accelerate/launchers.py', 'To launch a multi-device training from your notebook, the `Accelerator` should only be initialized inside your training function. Restart your notebook and make sure no cells initializes an `Accelerator`.', 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-bfloat16-and-fp16-modes-cannot-be-simultaneously', 'deepspeed/runtime/config.py', 'bfloat16 and fp16 modes cannot be simultaneously enabled', 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-train-batch-size-has-to-be-greater', 'deepspeed/runtime/config.py', 'Train batch size: {} has to be greater than 0', 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-micro-batch-size-per-gpu-has-to', 'deepspeed/runtime/config.py', 'Micro batch size per gpu: {} has to be greater than 0', 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-gradient-accumulation-steps-has-to-be-greater', 'deepspeed/runtime/config.py', 'Gradient accumulation steps: {} has to be greater than 0', 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-expected-a-string-path-to-an-existing', 'deepspeed/runtime/config.py', 'Expected a string path to an existing deepspeed config, or a dictionary or a valid base64. Received: {}', 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-either-train-batch-size-or-train-micro', 'deepspeed/runtime/config.py', 'Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided', 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-include-str-and-exclude-str-are-mutually', 'deepspeed/launcher/runner.py', 'include_str and exclude_str are mutually exclusive.', 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-launching-training-without-ssh-but-node-rank', 'deepspeed/launcher/runner.py', 'Launching training without ssh, but --node_rank is not set correctly.', 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-don-t-use-both-the-no-python', 'deepspeed/launcher/launch.py', "Don't use both the '--no_python' flag and the '--module' flag at the same time.", 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-unable-to-create-directory-for-each-rank', 'deepspeed/launcher/launch.py', 'unable to create directory {} for each rank log.', 'environment'),
    ('deepspeed', 'frameworks.deepspeed.usage-intel-mpi-requires-same-number-of-devices', 'deepspeed/launcher/multinode_runner.py', 'Intel MPI requires same number of devices per node', 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-slurm-backend-needs-the-same-slot-count', 'deepspeed/launcher/multinode_runner.py', 'slurm backend needs the same slot count on every host, got {}.', 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-mvapich-requires-same-number-of-devices-per', 'deepspeed/launcher/multinode_runner.py', 'mvapich requires same number of devices per node', 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-slurm-backend-cannot-select-specific-device-ids', 'deepspeed/launcher/multinode_runner.py', 'slurm backend cannot select specific device ids, got {} on {}. Filter whole hosts, or keep the first N slots on every host.', 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-deepspeed-requires-the-local-rank-environment-variable', 'deepspeed/runtime/engine.py', "DeepSpeed requires the LOCAL_RANK environment variable, it is set by the deepspeed launcher, deepspeed.init_distributed, or the torch's launcher. If using a different launcher please ensure LOCAL_RANK is set prior to initializing deepspeed.", 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-no-sync-context-manager-is-incompatible-with', 'deepspeed/runtime/engine.py', 'no_sync context manager is incompatible with gradient partitioning logic of ZeRO stage {}', 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-must-provide-optimizer-during-init-in-order', 'deepspeed/runtime/engine.py', 'must provide optimizer during init in order to use scale', 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-loss-must-be-a-scalar-tensor-with', 'deepspeed/runtime/engine.py', 'loss must be a scalar tensor with grad_fn. For non-scalar tensors, use tensor.backward(grad)', 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-must-provide-optimizer-during-init-in-order-2', 'deepspeed/runtime/engine.py', 'must provide optimizer during init in order to use backward', 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-loss-must-be-a-scalar-tensor-if', 'deepspeed/runtime/engine.py', 'loss must be a scalar tensor. If you need to pass output gradients, backward() of output tensors', 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-must-provide-optimizer-during-init-in-order-3', 'deepspeed/runtime/engine.py', 'must provide optimizer during init in order to use step', 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-train-batch-size-must-be-divisible-by', 'deepspeed/runtime/engine.py', 'Train batch size must be divisible by micro-batch data parallelism', 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-local-rank-ompi-comm-world-local-rank', 'deepspeed/runtime/engine.py', "LOCAL_RANK ({}) != OMPI_COMM_WORLD_LOCAL_RANK ({}), not sure how to proceed as we're seeing conflicting local rank info.", 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-type-fp16-is-not-supported-on-your', 'deepspeed/runtime/engine.py', 'Type fp16 is not supported on your device.', 'environment'),
    ('deepspeed', 'frameworks.deepspeed.usage-type-bf16-is-not-supported-on-your', 'deepspeed/runtime/engine.py', 'Type bf16 is not supported on your device.', 'environment'),
    ('deepspeed', 'frameworks.deepspeed.usage-the-deprecated-version-of-zero-stage-1', 'deepspeed/runtime/engine.py', 'The deprecated version of ZeRO Stage 1 is not supported in deepspeed >= 0.5.9. Please downgrade to a version less than 0.5.9 if you need to use this deprecated version of ZeRO.', 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-compile-is-not-supported-in-your-version', 'deepspeed/runtime/engine.py', 'compile is not supported in your version of PyTorch.', 'environment'),
    ('deepspeed', 'frameworks.deepspeed.usage-deepspeed-does-not-recognize-lr-scheduler', 'deepspeed/runtime/engine.py', 'DeepSpeed does not recognize LR scheduler {}', 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-mismatch-in-local-rank-setting-args-local', 'deepspeed/runtime/engine.py', "Mismatch in local rank setting, args.local_rank={} but env['LOCAL_RANK']={}.", 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-you-are-using-an-untested-zero-optimizer', 'deepspeed/runtime/engine.py', 'You are using an untested ZeRO Optimizer. Please add <"zero_allow_untested_optimizer": true> in the configuration file to use it.', 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-master-weights-feature-requires-offload-with-deepspeedcpuadam', 'deepspeed/runtime/zero/stage_1_and_2.py', 'Master weights feature requires {} Offload with DeepSpeedCPUAdam. Current ZeRO-Offload:{} optimizer type {}.', 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-master-weights-feature-requires-zero-3-offload', 'deepspeed/runtime/zero/stage3.py', 'Master weights feature requires ZeRO-3 Offload with DeepSpeedCPUAdam. Current ZeRO-3 Offload:{} optimizer type {}.', 'launch'),
    ('deepspeed', 'frameworks.deepspeed.usage-offloading-is-supported-only-for-deepspeed-fusedadam', 'deepspeed/runtime/zero/stage3.py', 'Offloading is supported only for DeepSpeed FusedAdam.', 'launch'),
    ('lightning', 'frameworks.lightning.usage-no-supported-gpu-backend-found', 'src/lightning/pytorch/trainer/connectors/accelerator_connector.py', 'No supported gpu backend found!', 'environment'),
    ('lightning', 'frameworks.lightning.usage-you-selected-an-invalid-strategy-name-strategy', 'src/lightning/pytorch/trainer/connectors/accelerator_connector.py', 'You selected an invalid strategy name: `strategy={}`. It must be either a string or an instance of `lightning.pytorch.strategies.Strategy`. Example choices: auto, ddp, ddp_spawn, deepspeed, ... Find a complete list of options in our documentation at https://lightning.ai', 'launch'),
    ('lightning', 'frameworks.lightning.usage-you-selected-an-invalid-accelerator-name-accelerator', 'src/lightning/pytorch/trainer/connectors/accelerator_connector.py', 'You selected an invalid accelerator name: `accelerator={}`. Available names are: auto, {}.', 'launch'),
    ('lightning', 'frameworks.lightning.usage-num-nodes-must-be-a-positive-integer', 'src/lightning/pytorch/trainer/connectors/accelerator_connector.py', '`num_nodes` must be a positive integer, but got {}.', 'launch'),
    ('lightning', 'frameworks.lightning.usage-trainer-devices-value-is-not-a-valid', 'src/lightning/pytorch/trainer/connectors/accelerator_connector.py', '`Trainer(devices={})` value is not a valid input using {} accelerator.', 'launch'),
    ('lightning', 'frameworks.lightning.usage-the-strategy-requires-a-gpu-accelerator-but', 'src/lightning/pytorch/trainer/connectors/accelerator_connector.py', "The strategy `{}` requires a GPU accelerator, but received `accelerator={}`. Please set `accelerator='cuda'`, `accelerator='gpu'`, or pass a `CUDAAccelerator()` instance to use FSDP.", 'launch'),
    ('lightning', 'frameworks.lightning.usage-trainer-strategy-is-not-compatible-with-an', 'src/lightning/pytorch/trainer/connectors/accelerator_connector.py', "`Trainer(strategy={})` is not compatible with an interactive environment. Run your code as a script, or choose a notebook-compatible strategy: `Trainer(strategy='ddp_notebook')`. In case you are spawning processes yourself, make sure to include the Trainer creation inside the worker function.", 'launch'),
    ('lightning', 'frameworks.lightning.usage-the-start-method-is-not-available-on', 'src/lightning/pytorch/strategies/launchers/multiprocessing.py', "The start method '{}' is not available on this platform. Available methods are: {}", 'environment'),
    ('lightning', 'frameworks.lightning.usage-calling-trainer-fit-twice-on-the-same', 'src/lightning/pytorch/strategies/launchers/multiprocessing.py', 'Calling `trainer.fit()` twice on the same Trainer instance using a spawn-based strategy is not supported. You can work around this limitation by creating a new Trainer instance and passing the `fit(ckpt_path=...)` argument.', 'launch'),
    ('lightning', 'frameworks.lightning.usage-lightning-attempted-to-launch-new-distributed-processes', 'src/lightning/pytorch/strategies/launchers/subprocess_script.py', 'Lightning attempted to launch new distributed processes with `local_rank > 0`. This should not happen. Possible reasons: 1) LOCAL_RANK environment variable was incorrectly modified by the user, 2) `ClusterEnvironment.creates_processes_externally` incorrectly implemented.', 'launch'),
    ('lightning', 'frameworks.lightning.usage-to-use-the-deepspeedstrategy-you-must-have', 'src/lightning/pytorch/strategies/deepspeed.py', 'To use the `DeepSpeedStrategy`, you must have DeepSpeed installed. Install it by running `pip install -U deepspeed`.', 'environment'),
    ('lightning', 'frameworks.lightning.usage-pytorch-2-6-requires-deepspeed-0-16', 'src/lightning/pytorch/strategies/deepspeed.py', "PyTorch >= 2.6 requires DeepSpeed >= 0.16.0. Detected DeepSpeed version: {}. Please upgrade by running `pip install -U 'deepspeed>=0.16.0'`.", 'environment'),
    ('lightning', 'frameworks.lightning.usage-the-deepspeed-strategy-is-only-supported-on', 'src/lightning/pytorch/strategies/deepspeed.py', 'The DeepSpeed strategy is only supported on CUDA GPUs but `{}` is used.', 'launch'),
    ('lightning', 'frameworks.lightning.usage-to-use-deepspeed-you-must-pass-in', 'src/lightning/pytorch/strategies/deepspeed.py', 'To use DeepSpeed you must pass in a DeepSpeed config dict, or a path to a JSON config. See: https://lightning.ai/docs/pytorch/stable/advanced/model_parallel.html#deepspeed', 'launch'),
    ('lightning', 'frameworks.lightning.usage-you-passed-in-a-path-to-a', 'src/lightning/pytorch/strategies/deepspeed.py', 'You passed in a path to a DeepSpeed config but the path does not exist: {}', 'launch'),
    ('lightning', 'frameworks.lightning.usage-the-optimizer-does-not-seem-to-reference', 'src/lightning/pytorch/strategies/fsdp.py', 'The optimizer does not seem to reference any FSDP parameters. HINT: Make sure to create the optimizer after setting up the model by referencing `self.trainer.model.parameters()` in the `configure_optimizers()` hook.', 'launch'),
    ('lightning', 'frameworks.lightning.usage-the-device-mesh-argument-is-only-supported', 'src/lightning/pytorch/strategies/fsdp.py', 'The `device_mesh` argument is only supported in torch >= 2.2.', 'environment'),
    ('vllm', 'frameworks.vllm.usage-data-parallel-size-local-must-be-data', 'vllm/config/parallel.py', 'data_parallel_size_local ({}) must be <= data_parallel_size ({})', 'launch'),
    ('vllm', 'frameworks.vllm.usage-data-parallel-external-lb-can-only-be', 'vllm/config/parallel.py', 'data_parallel_external_lb can only be set when data_parallel_size > 1', 'launch'),
    ('vllm', 'frameworks.vllm.usage-nnodes-1-can-only-be-set-when', 'vllm/config/parallel.py', 'nnodes > 1 can only be set when distributed exectuor backend is mp.', 'launch'),
    ('vllm', 'frameworks.vllm.usage-data-parallel-rank-must-be-in-the', 'vllm/config/parallel.py', 'data_parallel_rank ({}) must be in the range [0, {})', 'launch'),
    ('vllm', 'frameworks.vllm.usage-the-model-type-does-not-support-float16', 'vllm/config/model.py', 'The model type {} does not support float16. Reason: {}', 'launch'),
    ('vllm', 'frameworks.vllm.usage-sleep-mode-is-not-supported-on-current', 'vllm/config/model.py', 'Sleep mode is not supported on current platform.', 'environment'),
    ('vllm', 'frameworks.vllm.usage-number-of-experts-in-the-model-must', 'vllm/config/model.py', 'Number of experts in the model must be greater than 0 when expert parallelism is enabled.', 'launch'),
    ('vllm', 'frameworks.vllm.usage-pipeline-parallelism-is-not-supported-for-this', 'vllm/config/model.py', 'Pipeline parallelism is not supported for this model. Supported models implement the `SupportsPP` interface.', 'launch'),
    ('vllm', 'frameworks.vllm.usage-this-model-does-not-support-runner-generate', 'vllm/config/model.py', 'This model does not support `--runner generate`.', 'launch'),
    ('vllm', 'frameworks.vllm.usage-unknown-quantization-method-must-be-one-of', 'vllm/config/model.py', 'Unknown quantization method: {}. Must be one of {}.', 'launch'),
    ('vllm', 'frameworks.vllm.usage-quantization-method-specified-in-the-model-config', 'vllm/config/model.py', 'Quantization method specified in the model config ({}) does not match the quantization method specified in the `quantization` argument ({}).', 'launch'),
    ('vllm', 'frameworks.vllm.usage-max-num-batched-tokens-is-smaller-than', 'vllm/config/scheduler.py', 'max_num_batched_tokens ({}) is smaller than max_model_len ({}). This effectively limits the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. Please increase max_num_batched_tokens or decrease max_model_len.', 'launch'),
    ('vllm', 'frameworks.vllm.usage-max-num-batched-tokens-must-be-greater', 'vllm/config/scheduler.py', 'max_num_batched_tokens ({}) must be greater than or equal to max_num_seqs ({}).', 'launch'),
    ('vllm', 'frameworks.vllm.usage-the-quantization-method-is-not-supported-for', 'vllm/config/vllm.py', 'The quantization method {} is not supported for the current GPU. Minimum capability: {}. Current capability: {}.', 'environment'),
    ('vllm', 'frameworks.vllm.usage-to-load-a-model-from-s3-load', 'vllm/config/vllm.py', "To load a model from S3, 'load_format' must be 'runai_streamer' or 'runai_streamer_sharded', but got '{}'. Model: {}", 'launch'),
    ('vllm', 'frameworks.vllm.usage-failed-to-import-ray-please-install-ray', 'vllm/v1/executor/ray_utils.py', 'Failed to import Ray: {}.Please install Ray with `pip install ray`.', 'environment'),
    ('vllm', 'frameworks.vllm.usage-driver-node-id-is-not-included-in', 'vllm/v1/executor/ray_utils.py', "driver node id {} is not included in a placement group {}. Node id -> bundles {}. You don't have enough GPUs available in a current node. Check `ray status` and `ray list nodes` to see if you have available GPUs in a node `{{driver_node_id}}` before starting an vLLM engine.", 'launch'),
    ('vllm', 'frameworks.vllm.usage-current-platform-does-not-support-ray', 'vllm/v1/executor/ray_utils.py', 'current platform {} does not support ray.', 'environment'),
    ('transformers', 'frameworks.transformers.usage-passing-optimizers-is-not-allowed-if-pytorch', 'src/transformers/trainer.py', 'Passing `optimizers` is not allowed if PyTorch FSDP is enabled. You should subclass `Trainer` and override the `create_optimizer_and_scheduler` method.', 'launch'),
    ('transformers', 'frameworks.transformers.usage-auto-find-batch-size-isn-t-supported', 'src/transformers/trainer.py', "`auto_find_batch_size` isn't supported yet with DeepSpeed Zero-3. Please consider using Zero-2, Zero-1, or FSDP", 'launch'),
    ('transformers', 'frameworks.transformers.usage-save-only-model-option-is-not-compatible', 'src/transformers/trainer.py', "save_only_model option is not compatible with FSDP state dict type 'SHARDED_STATE_DICT'", 'launch'),
    ('transformers', 'frameworks.transformers.usage-using-fsdp-xxx-together-with-deepspeed-is', 'src/transformers/trainer.py', 'Using --fsdp xxx together with --deepspeed is not possible, deactivate one of those flags.', 'launch'),
    ('transformers', 'frameworks.transformers.usage-using-fsdp-only-works-in-distributed-training', 'src/transformers/trainer.py', 'Using fsdp only works in distributed training.', 'launch'),
    ('transformers', 'frameworks.transformers.usage-the-model-and-the-optimizer-parameters-are', 'src/transformers/trainer.py', 'The model and the optimizer parameters are not on the same device, which probably means you created an optimizer around your model **before** putting on the device and passing it to the `Trainer`. Make sure the lines `import torch_xla.core.xla_model as xm` and `model.to(xm.xla_device())` is performed before the optimizer creation in your script.', 'launch'),
    ('transformers', 'frameworks.transformers.usage-currently-debug-underflow-overflow-is-not-supported', 'src/transformers/trainer.py', 'Currently --debug underflow_overflow is not supported under DP. Please use DDP with torchrun', 'launch'),
    ('transformers', 'frameworks.transformers.usage-at-most-one-of-fp16-and-bf16', 'src/transformers/training_args.py', 'At most one of fp16 and bf16 can be True, but not both', 'launch'),
    ('transformers', 'frameworks.transformers.usage-using-the-trainer-with-pytorch-requires-accelerate', 'src/transformers/training_args.py', 'Using the `Trainer` with `PyTorch` requires `accelerate>={}`: Please run', 'environment'),
    ('transformers', 'frameworks.transformers.usage-tf32-requires-ampere-or-a-newer-gpu', 'src/transformers/training_args.py', '--tf32 requires Ampere or a newer GPU arch, cuda>=11 and torch>=1.7', 'environment'),
    ('transformers', 'frameworks.transformers.usage-zero-inference-only-makes-sense-with-zero', 'src/transformers/integrations/deepspeed.py', 'ZeRO inference only makes sense with ZeRO Stage 3 - please adjust your config', 'launch'),
    ('transformers', 'frameworks.transformers.usage-you-are-attempting-to-use-flash-attention', 'src/transformers/modeling_utils.py', 'You are attempting to use Flash Attention {} with a model not initialized on GPU and with no GPU available. This is not supported yet. Please make sure to have access to a GPU and either initialise the model on a GPU by passing a device_map or initialising the model on CPU and then moving it to GPU.', 'environment'),
    ('transformers', 'frameworks.transformers.usage-can-t-load-the-model-for-if', 'src/transformers/modeling_utils.py', "Can't load the model for '{}'. If you were trying to load it from 'https://huggingface.co/models', make sure you don't have a local directory with the same name. Otherwise, make sure '{}' is the correct path to a directory containing a file named {}.", 'launch'),
]


def _text(node: ast.AST) -> str | None:
    """A message literal's text, an f-string's with its fields as ``{}`` (literal braces doubled)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value.replace("{", "{{").replace("}", "}}") if isinstance(v, ast.Constant) else "{}"
                       for v in node.values)
    return None


def raise_sites(src: str) -> list[tuple[str, int, str]]:
    """``(text, line, outermost function)`` of every raise / assert / ``self._log_and_throw(Exc, text)`` message of
    ``src``, the line being the string literal's."""
    tree = ast.parse(src)
    fn_of: dict[int, str] = {}
    for fn in ast.walk(tree):  # outer functions come first: a nested one keeps its outermost name
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                fn_of.setdefault(id(node), fn.name)
    out = []
    for node in ast.walk(tree):
        msg = None
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            msg = node.exc.args[0]
        elif isinstance(node, ast.Assert) and node.msg is not None:
            msg = node.msg
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "_log_and_throw" \
                and len(node.args) > 1:
            msg = node.args[1]
        text = _text(msg) if msg is not None else None
        if text:
            out.append((text, msg.lineno, fn_of.get(id(node), "?")))
    return out


class Release:
    """One framework's released files, read from the installed package (torch) or a wheel / sdist."""

    def __init__(self, fw: str, wheels: Path | None, torch_dir: Path | None) -> None:
        self.fw = fw
        repo_prefix, pkg_prefix = RELEASES[fw][2]
        self.repo_prefix, self.pkg_prefix = repo_prefix, pkg_prefix
        self.torch_dir = torch_dir
        pattern = RELEASES[fw][3]
        self.archive = None
        if pattern is not None:
            found = sorted(wheels.glob(pattern)) if wheels else []
            if not found:
                raise SystemExit(f"{fw}: no {pattern} in {wheels} (see the pip download lines in this script's docstring)")
            self.archive = found[0]

    def read(self, path: str) -> str:
        member = self.pkg_prefix + path.removeprefix(self.repo_prefix)
        if self.archive is None:
            return (self.torch_dir.parent / member).read_text(encoding="utf-8")
        if self.archive.name.endswith(".whl"):
            with zipfile.ZipFile(self.archive) as z:
                return z.read(member).decode("utf-8")
        with tarfile.open(self.archive) as t:
            return t.extractfile(member).read().decode("utf-8")


def _toml(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)  # a TOML basic string is a JSON string for these texts


def entries(wheels: Path | None, torch_dir: Path | None, only: set[str]) -> dict[str, list[dict]]:
    """The entries of each output file (``pytorch``, ``frameworks``), in the order of :data:`PICKS`."""
    out: dict[str, list[dict]] = {"pytorch": [], "frameworks": []}
    releases: dict[str, Release] = {}
    sites: dict[tuple[str, str], list[tuple[str, int, str]]] = {}
    for fw, eid, path, fmt, blame in PICKS:
        if fw not in only:
            continue
        rel = releases.setdefault(fw, Release(fw, wheels, torch_dir))
        found = sites.setdefault((fw, path), raise_sites(rel.read(path)))
        hit = next((s for s in found if s[0] == fmt), None) or next((s for s in found if s[0].startswith(fmt)), None)
        if hit is None:
            raise SystemExit(f"{eid}: its text is at no raise site of {path} at {RELEASES[fw][1]}")
        repo, tag = RELEASES[fw][:2]
        meaning = SPECIAL.get(eid) or MEANING[(fw, blame)].format(fn=hit[2])
        out["pytorch" if fw == "torch" else "frameworks"].append(dict(
            id=eid, syntax="python", format=fmt, source=f"{repo} {tag} {path}:{hit[1]}", meaning=meaning, blame=blame,
            role="root", severity="suspect", action=ACTION[(fw, blame)]))
    return out


HEADER = """# hangdbg error catalog: {what} ({n} entries).
# Written by scripts/catalog/mine_refusals.py: each pick chosen and classified by hand in that script, its citation
# the line of its raise / assert site in the release read ({releases}).
# The launch's or the code's mistake, or what the machine lacks: the same on every rank, so no rank is blamed.
domain = "{domain}"
"""


def render(domain: str, what: str, ents: list[dict]) -> str:
    fws = sorted({fw for fw, eid, *_ in PICKS if eid in {e["id"] for e in ents}})
    releases = ", ".join(f"{RELEASES[fw][0]} {RELEASES[fw][1]}" for fw in fws)
    parts = [HEADER.format(what=what, n=len(ents), releases=releases, domain=domain)]
    for e in ents:
        parts.append("[[entry]]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in e.items()))
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wheels", type=Path, help="the folder of the downloaded wheels / sdist")
    ap.add_argument("--torch", type=Path, default=None, help="the torch package folder (default: the installed one)")
    ap.add_argument("--out", type=Path, default=ROOT / "hangdbg" / "catalog" / "data")
    ap.add_argument("--check", action="store_true", help="resolve every pick and compare with the files, write nothing")
    args = ap.parse_args(argv)
    torch_dir = args.torch
    if torch_dir is None:
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.origin is None:
            raise SystemExit("torch is not installed here: pass --torch DIR (torch 2.13.0)")
        torch_dir = Path(spec.origin).parent
    ents = entries(args.wheels, torch_dir, {fw for fw, *_ in PICKS})
    files = {"pytorch_refusals.toml": render("pytorch", "torch.distributed's own refusals", ents["pytorch"]),
             "frameworks_refusals.toml": render("frameworks", "the frameworks' own refusals", ents["frameworks"])}
    for name, text in files.items():
        path = args.out / name
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                print(f"{name}: differs from what the releases give", file=sys.stderr)
                return 1
        else:
            path.write_text(text, encoding="utf-8")
    print(f"{sum(map(len, ents.values()))} entries" + (" checked" if args.check else " written"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
