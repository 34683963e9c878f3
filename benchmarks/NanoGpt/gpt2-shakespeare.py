# GPT-2 small from scratch on tiny Shakespeare in GPT-2's BPE: the protocol's M2 (decisions D2).
# M2b (GPT-2 medium) runs this file with --n_layer=24 --n_head=16 --n_embd=1024 on the command line.
# A nanoGPT config file: train.py runs it with exec(), so it holds plain assignments only.
# Data: data/shakespeare/{train,val}.bin as nanoGPT's data/shakespeare/prepare.py writes them;
# there is no meta.pkl there, so train.py builds GPT-2's vocabulary padded to 50,304.

out_dir = "out-gpt2-shakespeare"
eval_interval = 250  # section 7 A: evaluation every 250 steps on 200 batches of each split
eval_iters = 200
log_interval = 10  # section 5: a line every 10 steps, right after a loss read
always_save_checkpoint = False
init_from = "scratch"
wandb_log = False

dataset = "shakespeare"
gradient_accumulation_steps = 1
batch_size = 8
block_size = 1024

# GPT-2 small, bias off, no dropout
n_layer = 12
n_head = 12
n_embd = 768
dropout = 0.0
bias = False

# AdamW, 2,000 steps: warm-up over 100, cosine decay to 6e-5 by step 2,000
learning_rate = 6e-4
max_iters = 2000
weight_decay = 1e-1
beta1 = 0.9
beta2 = 0.95
grad_clip = 1.0
decay_lr = True
warmup_iters = 100
lr_decay_iters = 2000
min_lr = 6e-5
