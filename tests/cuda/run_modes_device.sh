#!/usr/bin/env bash
# Every precision mode of the DiT and the decoder at the release shape on the GPU machine, in one call (random
# weights at the released shapes, 544x960x124), beside the bf16 default, each with its error against bf16:
#  1. the backend-ops harness (RESULT line and failures only) and the tiny end to end CUDA vs CPU
#  2. h3 bench --what dit: bf16; --quant fp8; --quant int8; --quant fp8 / int8 with --attention sage8 (--compare-bf16 1:
#     the forward's rel L2 against bf16 on the same weights)
#  3. h3 bench --what vae: bf16 and --vae-quant fp8
#  4. the 4-evaluation t2va at 960x544x124 as a session of two prompts (the second is warm), to MP4 (the small FFmpeg
#     of tools/build_ffmpeg_min.sh), the default and --preset fast (PRESETS="default fast")
#  5. h3 serve with the same weights: two jobs through the API (SERVE_FLAGS, e.g. "--preset fast")
# Everything under $OUT is packed into $OUT/all.tar.gz (a device call returns few files); the summary goes to stdout.
# Build here: make CUDA=1 BUILD=build-cuda-media cuda-tests build-cuda-media/h3 (MEDIA=1), bash tools/dev_stage.sh
# build-cuda-media .dev-media; carry .dev-media.
# Usage (device): bash tests/cuda/run_modes_device.sh .dev-media [parts, default 1234]
set -u
cd "$(dirname "$0")/../.."
B=${1:-build-cuda-media}
PARTS=${2:-1234}
O=${OUT:-modes-logs}
mkdir -p "$O"
bash tools/dev_unpack.sh "$B"
export LD_LIBRARY_PATH="$B/lib:$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
has() { "$B/h3" "$1" --help 2>&1 | grep -q -- "$2"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>&1 | head -1
if [[ $PARTS == *1* ]]; then
    timeout 100 "$B/tests/test_backend_ops" --backend cuda >"$O/harness.log" 2>&1
    echo "== harness: rc $? $(grep -E '^RESULT' "$O/harness.log" | tail -1)"; grep -E '^FAIL|: FAIL' "$O/harness.log" | head -10
    OUT="$O/e2e" timeout 150 bash tests/cuda/run_e2e_device.sh "$B" >"$O/e2e_run.log" 2>&1
    echo "== tiny end to end: $(grep RESULT "$O/e2e_run.log" | tail -1)"; grep FAIL "$O/e2e_run.log" | head -5
fi
if [[ $PARTS == *2* ]]; then
    D=(bench --backend cuda --what dit --shapes 544x960x124 --repeats 2)
    timeout 90 "$B/h3" "${D[@]}" >"$O/dit_bf16.log" 2>&1
    echo "== DiT bf16: rc $?"; grep -E '^DIT' "$O/dit_bf16.log"
    for m in ${MODES:-"--quant fp8" "--quant int8" "--quant fp8 --attention sage8" "--quant int8 --attention sage8"}; do
        f=$(echo "$m" | tr -d ' -')
        timeout 100 "$B/h3" "${D[@]}" $m --compare-bf16 1 >"$O/dit_$f.log" 2>&1
        echo "== DiT $m: rc $?"; grep -E '^DIT' "$O/dit_$f.log"
    done
fi
if [[ $PARTS == *3* ]]; then
    for q in none fp8; do
        H3_VAE_PROFILE=1 timeout 100 "$B/h3" bench --backend cuda --what vae --shapes 544x960x124 --vae-repeats 2 \
            --vae-quant $q >"$O/vae_$q.log" 2>&1
        echo "== VAE decode --vae-quant $q: rc $?"; grep -E '^VAE|vae profile' "$O/vae_$q.log" | tail -2
    done
fi
if [[ $PARTS == *4* ]]; then
    P="A red fox runs through fresh snow at dawn, its breath steaming in the cold air, while birds call from the pines."
    P2="A surfer rides a glassy wave at sunset while gulls circle overhead and the crowd on the beach cheers."
    for preset in ${PRESETS:-default fast}; do
        extra=(); [ $preset = fast ] && extra=(--preset fast)
        mkdir -p "$O/clips_$preset"
        printf '%s\n%s\n' "!output $O/clips_$preset" "$P" "$P2" | timeout 150 "$B/h3" generate -d tests/fixtures/skeleton \
            --random-weights --backend cuda --width 960 --height 544 --frames 124 --steps 4 --profile --seed 42 \
            "${extra[@]}" >"$O/session_$preset.log" 2>&1
        echo "== session, 2 prompts to MP4, $preset: rc $?"
        grep -E '^  (text encoder|denoise|audio VAE decode|video VAE decode|mux|compute|total)|preset' "$O/session_$preset.log" | tail -12
        ls -la "$O/clips_$preset" 2>/dev/null | tail -2
    done
fi
if [[ $PARTS == *5* ]]; then
    # h3 serve (docs/serve.md) with random release-shape weights: two jobs through the API, the second one warm
    "$B/h3" serve -d tests/fixtures/skeleton --random-weights --backend cuda --port 18437 --data "$O/serve" ${SERVE_FLAGS:-} \
        >"$O/serve.log" 2>&1 &
    SP=$!
    timeout 170 python3 - "$O" <<'PY'
import json, sys, time, urllib.request
base = "http://127.0.0.1:18437"
def call(method, path, body=None):
    req = urllib.request.Request(base + path, method=method, data=json.dumps(body).encode() if body else None,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())
for _ in range(120):
    try:
        call("GET", "/healthz"); break
    except Exception:
        time.sleep(0.5)
ids = []
for p in ["A red fox runs through fresh snow at dawn.", "A surfer rides a glassy wave at sunset."]:
    v = call("POST", "/v1/videos", {"prompt": p, "size": "960x544", "frames": 124, "steps": 4, "seed": 42})
    ids.append(v["id"]); t_sub = time.time()
done = {}
while len(done) < 2:
    for i in ids:
        v = call("GET", "/v1/videos/" + i)
        if v["status"] in ("completed", "failed") and i not in done:
            done[i] = (v, time.time())
    time.sleep(0.2)
for k, i in enumerate(ids):
    v, t = done[i]
    print("serve job %d: %s, started_at %s completed_at %s (%.0f s), %s" % (k + 1, v["status"], v.get("started_at"),
          v.get("completed_at"), (v.get("completed_at") or 0) - (v.get("started_at") or 0), v.get("error") or ""))
t1 = done[ids[0]][1]; t2 = done[ids[1]][1]
print("serve: job 2 finished %.2f s after job 1 (its run time, warm)" % (t2 - t1))
PY
    echo "== serve, 2 jobs: rc $?"
    kill $SP 2>/dev/null; wait $SP 2>/dev/null
    grep -E "phase|denoise|decode" "$O/serve.log" | tail -4
fi
tar -czf "$O/all.tar.gz" -C "$O" --exclude all.tar.gz --exclude '*.mp4' . 2>/dev/null
exit 0
