#!/usr/bin/env bash
# Where a served job's time goes against the warm session's (docs/serve.md "On the GPU"), random release-shape
# weights, 960x544x124, 4 passes, --preset fast, to MP4 (the small FFmpeg of tools/build_ffmpeg_min.sh):
#  1. an interactive session of two prompts (the second is warm), --profile;
#  2. h3 serve with the same flags, three jobs submitted at once: 1 (cold: makes the weights), 2 with "previews":
#     false, 3 with previews (half-size previews: the server asks for 320 pixels); each job's own time from the
#     server's "generation took" line;
#  3. bench/bench_mp4: the x264 encode of 124 frames of 960x544 alone, per x264 preset.
# Build here: make CUDA=1 MEDIA=1 BUILD=build-cuda-media build-cuda-media/h3 build-cuda-media/bench/bench_mp4,
# bash tools/dev_stage.sh build-cuda-media .dev-media; carry .dev-media.
# Usage (device): bash tests/cuda/run_serve_time_device.sh [.dev-media]
set -u
cd "$(dirname "$0")/../.."
B=${1:-.dev-media}; bash tools/dev_unpack.sh "$B"; O=${OUT:-serve-time-logs}; mkdir -p "$O"
export LD_LIBRARY_PATH=$PWD/$B/lib:$PWD/$B
P="A red fox runs through fresh snow at dawn, its breath steaming in the cold air, while birds call from the pines."
P2="A surfer rides a glassy wave at sunset while gulls circle overhead and the crowd on the beach cheers."
G=(-d tests/fixtures/skeleton --random-weights --backend cuda --width 960 --height 544 --frames 124 --steps 4 --seed 42 --preset fast)
mkdir -p "$O/clips"
printf '%s\n%s\n%s\n' "!output $O/clips" "$P" "$P2" | timeout 120 "$B/h3" generate "${G[@]}" --profile >"$O/session.log" 2>&1
echo "== session, 2 prompts to MP4, --preset fast: rc $?"
grep -E '^  (text encoder|denoise|audio VAE decode|video VAE decode|mux|compute|total)' "$O/session.log" | tail -7
rm -rf "$O/clips"
"$B/h3" serve -d tests/fixtures/skeleton --random-weights --backend cuda --preset fast --port 18437 --data "$O/serve" \
    >"$O/serve.log" 2>&1 &
SP=$!
timeout 200 python3 - <<'PY'
import json, time, urllib.request
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
for k, p in enumerate(["A red fox runs through fresh snow at dawn.", "A surfer rides a glassy wave at sunset.",
                       "A lighthouse on a cliff in a storm at night."]):
    body = {"prompt": p, "size": "960x544", "frames": 124, "steps": 4, "seed": 42}
    if k == 1: body["previews"] = False
    ids.append(call("POST", "/v1/videos", body)["id"])
done = {}
while len(done) < 3:
    for i in ids:
        v = call("GET", "/v1/videos/" + i)
        if v["status"] in ("completed", "failed"): done[i] = v
    time.sleep(0.2)
for k, i in enumerate(ids):
    v = done[i]
    print("serve job %d (%s): %s %s" % (k + 1, ["cold, previews", "warm, no previews", "warm, previews"][k], v["status"], v.get("error") or ""))
PY
echo "== serve, 3 jobs: rc $?"
kill $SP 2>/dev/null; wait $SP 2>/dev/null
grep -E "generation took|failed" "$O/serve.log"
bm=$PWD/$B/bench/bench_mp4
for pr in fast veryfast superfast ultrafast; do (cd "$O" && timeout 40 "$bm" 960 544 124 0 $pr 2>&1 | tail -1); done
for pr in fast veryfast; do (cd "$O" && timeout 40 "$bm" 960 544 124 12 $pr 2>&1 | tail -1); done
rm -rf "$O/serve"/*/*.mp4 2>/dev/null
tar -czf "$O/all.tar.gz" -C "$O" --exclude all.tar.gz --exclude '*.mp4' . 2>/dev/null
exit 0
