# Bad input ends every rank within 10 s with exit code 2 and one clear message naming the option
# or file and the value.
source "$(dirname "$0")/lib.sh"

"$MNDDP_DATA_BIN" synth --out "$WORK/good" --train-samples 256 --val-samples 64 --shards 2 --shape 1,8,8 >/dev/null
"$MNDDP_DATA_BIN" synth --out "$WORK/other" --train-samples 64 --val-samples 16 --shards 1 --shape 1,6,6 >/dev/null
"$MNDDP_DATA_BIN" synth --out "$WORK/tiny" --train-samples 2 --val-samples 2 --shards 1 --shape 4 >/dev/null
printf '%s\n%s\n' "$WORK/good/train_000.h5" "$WORK/other/train_000.h5" >"$WORK/mixed.txt"
GOOD=(--train-data "$WORK/good/train_*.h5" --val-data "$WORK/good/val_*.h5" --metrics-file "")

run_mpi 2 10 "${GOOD[@]}" --train-data "$WORK/missing/train_*.h5"
expect_usage_error "missing file" "--train-data" "$WORK/missing/train_*.h5"

run_mpi 2 10 "${GOOD[@]}" --train-data "$WORK/good/nope.h5"
expect_usage_error "missing named file" "nope.h5"

run_mpi 2 10 "${GOOD[@]}" --x-name images
expect_usage_error "missing dataset" "images" "train_000.h5"

run_mpi 2 10 "${GOOD[@]}" --train-data "$WORK/mixed.txt"
expect_usage_error "shards whose shapes disagree" "train_000.h5" "8"

run_mpi 2 10 "${GOOD[@]}" --model resnet9000
expect_usage_error "unknown model" "--model" "resnet9000"

run_mpi 2 10 "${GOOD[@]}" --lr=-0.5
expect_usage_error "negative lr" "--lr" "-0.5"

run_mpi 2 10 "${GOOD[@]}" --lr fast
expect_usage_error "non-numeric lr" "lr" "fast"

run_mpi 2 10 "${GOOD[@]}" --batch-size 100000
expect_usage_error "batch larger than the data" "--batch-size" "100000" "256"

run_mpi 3 10 --train-data "$WORK/tiny/train_*.h5" --val-data "" --batch-size 1 --metrics-file ""
expect_usage_error "more ranks than samples" "3 ranks" "2 training samples"

run_mpi 2 10 "${GOOD[@]}" --config "$WORK/absent.ini"
expect_usage_error "unreadable config file" "--config" "$WORK/absent.ini"

run_mpi 2 10 "${GOOD[@]}" --config "$WORK"
expect_usage_error "config path is a directory" "--config" "$WORK"

printf 'lr = 0.1\nbatchsize = 3\n' >"$WORK/typo.ini"
run_mpi 2 10 "${GOOD[@]}" --config "$WORK/typo.ini"
expect_usage_error "unknown key in config file" "typo.ini" "batchsize"

MNDDP_EPOCHS=many run_mpi 2 10 "${GOOD[@]}"
expect_usage_error "bad environment value" "MNDDP_EPOCHS" "many"

run_mpi 2 10 "${GOOD[@]}" --num-classes 3
expect_usage_error "labels outside num-classes" "--num-classes" "good/train_00"

run_mpi 2 10 "${GOOD[@]}" --model convnet --train-data "$WORK/tiny/train_*.h5" --val-data "" --batch-size 1
expect_usage_error "convnet on flat samples" "--model convnet" "[4]"

run_mpi 2 10 "${GOOD[@]}" --backend nccl
expect_usage_error "nccl backend without GPUs" "--backend nccl" "use --backend mpi"

run_mpi 2 10 "${GOOD[@]}" --device cuda
expect_usage_error "cuda device without GPUs" "--device cuda"

finish
