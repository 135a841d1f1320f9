#!/bin/bash
# A Megatron-LM launch script in the style of examples/llama/train_llama3_70b.sh: 16 nodes of 8
# GPUs, TP 8 x PP 4 (so D = 128 / 32 = 4), interleaved with 5 layers per model chunk.
export CUDA_DEVICE_MAX_CONNECTIONS=1
TP=8
PP=4
GBS=64
DISTRIBUTED_ARGS=(
    --nproc_per_node 8
    --nnodes 16
    --master_addr $MASTER_ADDR
    --master_port 6000
)
MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size $TP
    --pipeline-model-parallel-size $PP
    --num-layers-per-virtual-pipeline-stage 5
    --sequence-parallel
    --use-distributed-optimizer
    --overlap-grad-reduce
)
TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size ${GBS}
    --train-iters 500000
    --lr 1.5e-4 --min-lr 1.5e-5 --lr-decay-style cosine
    --bf16
    --seq-length 4096
    --seed 1234
)
torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${MODEL_PARALLEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    --data-path $DATA_PATH \
    --save $CHECKPOINT_PATH --log-interval 1
