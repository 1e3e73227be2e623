#!/usr/bin/env bash
# `h3 serve` (docs/serve.md) on the tiny snapshot, the server on 127.0.0.1 at a free port (--port 0, the port read
# from its "listening on" line), driven with curl:
#  1. the API end to end: healthz, models, a JSON job (202, queued), its event stream (progress, PNG previews,
#     done), status, the MP4 (ffprobe; byte-identical to `h3 generate` with the same settings), Range (206 / 416),
#     list, a multipart fl2va job with an uploaded keyframe, a base64 reference image;
#  2. every error path: bad JSON, unknown field, bad values (the CLI's rules, 400 with the one-line message),
#     a body over --max-body and an upload over --max-upload (413), unknown id / path (404), method (405),
#     content of an unfinished job (409), a wrong Content-Type (415);
#  3. DELETE: a queued job cancelled, a running one cancelled at its next step, a finished one deleted;
#  4. 50 jobs submitted at once (8 at a time): all completed, FIFO, nothing lost;
#  5. a full queue (429), then kill -9 during a job and a restart: finished jobs listed, the interrupted one
#     failed, the queued one run, no partial file served or left;
#  6. --api-key-file: 401 without / with a wrong key, the bearer key, the page's cookie; healthz and the page open;
#     a non-loopback --host without a key refused at start;
#  7. the page in headless Chromium (tests/cli/lib/serve_cdp.c over the DevTools pipe): signed in, prompt typed,
#     a keyframe set, submitted, the <video> loads the clip, the history's "new seed" remixes it (the keyframe
#     kept: the MP4 = h3 generate's with it and the new seed); a screenshot saved as out/test-artifacts/serve_page.png
#     (H3_SERVE_ARTIFACTS=DIR elsewhere) and checked not blank;
#  (8., the remix endpoint, is tests/cli/serve_remix.sh: not timing-sensitive, it runs beside the other tests).
set -u
source "$(dirname "$0")/lib/common.bash" # H3, TINY, $tmp (removed at exit), pass/fail, ok, bad, check
source "$(dirname "$0")/lib/serve.bash" # the skips; start_server, jget, submit, status_of, wait_status, section_done, err

# ---- 1. the API end to end ----
start_server "$tmp/d1" "$tmp/s1.log" --resident --queue 64 --max-body 262144 --max-upload 65536 || { echo "RESULT $pass $fail"; exit 1; }
h=$(curl -s -w ' %{http_code}' "$B/healthz" | tr -d '\n')
check "healthz ($h)" 'grep -q "\"status\":\"ok\".* 200$" <<<"$h"'
m=$(curl -s "$B/v1/models")
check "models ($m)" '[ "$(jget "d[\"data\"][0][\"id\"]+\" \"+\",\".join(d[\"data\"][0][\"tasks\"])" <<<"$m")" = "h3 t2va,fl2va,ref2va" ]'
code=$(submit '{"prompt":"A red fox.","size":"64x32","frames":108,"steps":2,"seed":7}')
id=$(jget 'd["id"]' <"$tmp/sub.json")
check "POST /v1/videos: 202, a queued video object ($code $(head -c 200 "$tmp/sub.json"))" \
    '[ "$code" = 202 ] && [[ "$id" =~ ^video_[0-9a-f]{32}$ ]] && [ "$(jget "d[\"object\"],d[\"progress\"],d[\"frames\"]" <"$tmp/sub.json")" = "video 0 124" ] && grep -qE "\"status\":\"(queued|in_progress)\"" "$tmp/sub.json"'
curl -s -N --max-time 60 "$B/v1/videos/$id/events" >"$tmp/events.txt"
np=$(grep -c '^event: progress' "$tmp/events.txt"); nv=$(grep -c '^event: preview' "$tmp/events.txt")
check "events: progress ($np) and PNG previews ($nv, one per pass), then done: completed" \
    '[ "$np" -ge 3 ] && [ "$nv" = 2 ] && grep -q "\"image\":\"data:image/png;base64,iVBORw0KGgo" "$tmp/events.txt" && [ "$(grep "^event:" "$tmp/events.txt" | tail -1)" = "event: done" ] && tail -2 "$tmp/events.txt" | grep -q "\"status\":\"completed\",\"progress\":100"'
# the previews are PNGs of the 64x32 canvas
grep '^data: .*"image"' "$tmp/events.txt" | tail -1 | sed 's/^data: //' | jget 'd["image"].split(",")[1]' | base64 -d >"$tmp/preview.png"
check "a preview decodes as a 64x32 PNG ($(ffprobe -v error -show_entries stream=codec_name,width,height -of csv=p=0 "$tmp/preview.png" 2>&1))" \
    '[ "$(ffprobe -v error -show_entries stream=codec_name,width,height -of csv=p=0 "$tmp/preview.png")" = "png,64,32" ]'
check "GET /v1/videos/ID: completed, progress 100" '[ "$(curl -s "$B/v1/videos/$id" | jget "d[\"status\"],d[\"progress\"]")" = "completed 100" ]'
code=$(curl -s -o "$tmp/v1.mp4" -w '%{http_code}' "$B/v1/videos/$id/content")
probe=$(ffprobe -v error -count_frames -show_entries stream=codec_name,width,height,nb_read_frames -of csv=p=0 "$tmp/v1.mp4" 2>&1 | tr '\n' ' ')
check "content: 200, H.264 64x32 124 frames + AAC ($code $probe)" '[ "$code" = 200 ] && [ "$probe" = "h264,64,32,124 aac,,,"* ] || [[ "$probe" == "h264,64,32,124 aac"* ]]'
"$H3" generate -d "$TINY" -p "A red fox." --width 64 --height 32 --frames 108 --steps 2 --seed 7 -o "$tmp/cli.mp4" 2>/dev/null
check "the served MP4 = h3 generate's with the same settings" 'cmp -s "$tmp/v1.mp4" "$tmp/cli.mp4"'
size=$(stat -c %s "$tmp/v1.mp4")
hdr=$(curl -s -D - -o "$tmp/r1" -H 'Range: bytes=100-199' "$B/v1/videos/$id/content" | tr -d '\r')
check "Range bytes=100-199: 206, Content-Range, the right bytes" \
    'grep -q "^HTTP/1.1 206" <<<"$hdr" && grep -q "^Content-Range: bytes 100-199/$size$" <<<"$hdr" && cmp -s "$tmp/r1" <(tail -c +101 "$tmp/v1.mp4" | head -c 100)'
curl -s -o "$tmp/r2" -H 'Range: bytes=-10' "$B/v1/videos/$id/content"
check "Range bytes=-10: the last 10 bytes" 'cmp -s "$tmp/r2" <(tail -c 10 "$tmp/v1.mp4")'
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Range: bytes=$size-" "$B/v1/videos/$id/content")
check "Range past the end: 416 ($code)" '[ "$code" = 416 ]'
curl -s -N --max-time 10 "$B/v1/videos/$id/events" >"$tmp/events2.txt"
check "events of a finished job: its done event alone" \
    '[ "$(grep -c "^event:" "$tmp/events2.txt")" = 1 ] && grep -q "^event: done" "$tmp/events2.txt"'
l=$(curl -s "$B/v1/videos")
check "GET /v1/videos lists it" '[ "$(jget "d[\"object\"],d[\"data\"][0][\"id\"]" <<<"$l")" = "list $id" ]'
# a keyframe (one of the served video's frames) uploaded as multipart/form-data: fl2va
ffmpeg -v error -i "$tmp/v1.mp4" -frames:v 1 "$tmp/key.png"
code=$(curl -s -o "$tmp/sub.json" -w '%{http_code}' -X POST "$B/v1/videos" -F prompt="A fox turns." -F size=64x32 \
    -F frames=108 -F steps=1 -F previews=false -F first_frame=@"$tmp/key.png")
idf=$(jget 'd["id"]' <"$tmp/sub.json")
check "multipart with a first_frame upload: 202 ($code $(head -c 160 "$tmp/sub.json"))" \
    '[ "$code" = 202 ] && [ "$(jget "d[\"inputs\"][0][\"role\"],d[\"inputs\"][0][\"file\"]" <"$tmp/sub.json")" = "first_frame input-0.png" ]'
# a reference image as base64 in JSON: ref2va
b64=$(base64 -w0 "$tmp/key.png")
code=$(submit "{\"prompt\":\"A fox.\",\"size\":\"64x32\",\"frames\":108,\"steps\":1,\"previews\":false,\"ref_image_size\":\"match\",\"references\":[{\"kind\":\"image\",\"data\":\"data:image/png;base64,$b64\"}]}")
idr=$(jget 'd["id"]' <"$tmp/sub.json")
check "JSON with a base64 reference image: 202 ($code)" '[ "$code" = 202 ]'
wait_status "$idf" completed 60; check "the fl2va job completed ($(curl -s "$B/v1/videos/$idf" | head -c 300))" '[ "$(status_of "$idf")" = completed ]'
wait_status "$idr" completed 60; check "the ref2va job completed ($(curl -s "$B/v1/videos/$idr" | head -c 300))" '[ "$(status_of "$idr")" = completed ]'
curl -s -o "$tmp/vf.mp4" "$B/v1/videos/$idf/content"
check "the fl2va MP4 probes as H.264 64x32" '[ "$(ffprobe -v error -select_streams v -show_entries stream=codec_name,width,height -of csv=p=0 "$tmp/vf.mp4")" = "h264,64,32" ]'

section_done 1
p1=$(curl -s "$B/v1/videos?order=asc&limit=1" | jget 'd["data"][0]["id"],d["has_more"]')
p2=$(curl -s "$B/v1/videos?order=asc&limit=5&after=$id" | jget '" ".join(v["id"] for v in d["data"]),d["has_more"]')
check "list pages: asc, limit, after ($p1 / $p2)" '[ "$p1" = "$id True" ] && [ "$p2" = "$idf $idr False" ]'
# two jobs with the same settings: the second one's ETA (eta_seconds) is the denoise's time left (phase_eta_seconds)
# plus what the first took for the phases after it (docs/serve.md "The video object"); 6 passes, so the denoise
# reports its time left more than once (with 2 the one report could be missed on an idle machine)
submit '{"prompt":"A red fox.","size":"64x32","frames":108,"steps":6,"seed":8}' >/dev/null
code=$(submit '{"prompt":"A red fox.","size":"64x32","frames":108,"steps":6,"seed":9}')
ide=$(jget 'd["id"]' <"$tmp/sub.json")
curl -s -N --max-time 60 "$B/v1/videos/$ide/events" >"$tmp/events_eta.txt"
eta=$(grep '^data: ' "$tmp/events_eta.txt" | sed 's/^data: //' | "$PYTHON" -c '
import json, sys
best = None
for line in sys.stdin:
    d = json.loads(line)
    if str(d.get("phase", "")).startswith("denoise") and d.get("eta_seconds") is not None and d.get("phase_eta_seconds") is not None:
        best = (d["eta_seconds"], d["phase_eta_seconds"])
print("%.4f %.4f" % best if best else "none")')
check "a repeated job's ETA during the denoise covers the phases after it (job, phase: $eta)" \
    '[ "$eta" != none ] && "$PYTHON" -c "import sys; j, p = map(float, sys.argv[1:]); sys.exit(0 if j > p >= 0 else 1)" $eta'
# ---- 2. error paths ----
V=(-X POST "$B/v1/videos" -H "$J")
err "bad JSON" 400 '^the body is not valid JSON: ' "${V[@]}" -d '{"prompt": "x",'
err "not an object" 400 'must be a JSON object' "${V[@]}" -d '[1]'
err "unknown field" 400 "^unknown field 'colour'" "${V[@]}" -d '{"prompt":"x","colour":"red"}'
err "no prompt" 400 '^prompt is required' "${V[@]}" -d '{"size":"64x32"}'
err "size not WxH" 400 '^size must be "WIDTHxHEIGHT"' "${V[@]}" -d '{"prompt":"x","size":"big"}'
err "a canvas the CLI refuses (h3_engine_check's message)" 400 '^width 100 height 64: both must be multiples of 32' "${V[@]}" -d '{"prompt":"x","size":"100x64"}'
err "steps out of the CLI's range" 400 "^steps expects an integer in 1..1000, got '0'" "${V[@]}" -d '{"prompt":"x","steps":0}'
err "frames too short (the pipeline's rule)" 400 'frames' "${V[@]}" -d '{"prompt":"x","size":"64x32","frames":20}'
err "seconds and frames" 400 'give one of them' "${V[@]}" -d '{"prompt":"x","seconds":5,"frames":120}'
err "seed not a number" 400 '^seed expects an unsigned 64-bit integer' "${V[@]}" -d '{"prompt":"x","seed":-1}'
err "preset unknown" 400 '^preset must be quality, fast or preview' "${V[@]}" -d '{"prompt":"x","preset":"turbo"}'
err "reuse with core_reuse" 400 'reuse' "${V[@]}" -d '{"prompt":"x","size":"64x32","reuse":2,"core_reuse":2}'
err "bad base64" 400 'not valid base64' "${V[@]}" -d '{"prompt":"x","first_frame":"@@@"}'
err "wrong Content-Type" 415 'Content-Type must be' -X POST "$B/v1/videos" -H 'Content-Type: text/plain' -d 'x'
head -c 300000 /dev/zero | tr '\0' 'a' >"$tmp/big.txt"
err "a body over --max-body" 413 'larger than the limit of 262144 bytes' "${V[@]}" --data-binary @"$tmp/big.txt"
head -c 70000 /dev/urandom >"$tmp/big.png"
err "an upload over --max-upload" 413 'first_frame: the upload is larger than the limit of 65536 bytes' -X POST "$B/v1/videos" -F prompt=x -F first_frame=@"$tmp/big.png"
err "a broken multipart body" 400 'multipart' -X POST "$B/v1/videos" -H 'Content-Type: multipart/form-data; boundary=XX' --data-binary $'--XX\r\nContent-Disposition: form-data; name="prompt"\r\n\r\nx'
err "unknown id" 404 'no video with this id' "$B/v1/videos/video_0123456789abcdef0123456789abcdef"
err "a malformed id" 404 'no such path' "$B/v1/videos/../../etc/passwd"
err "unknown path" 404 'no such path' "$B/v2/whatever"
err "wrong method" 405 'method not allowed' -X PUT "$B/v1/videos"
err "list: bad limit" 400 'limit' "$B/v1/videos?limit=0"
check "no error left a job behind (5 jobs listed)" '[ "$(curl -s "$B/v1/videos?limit=100" | jget "len(d[\"data\"])")" = 5 ]'

section_done 2
# ---- 3. DELETE: cancel a running job, cancel a queued one, delete a finished one ----
submit '{"prompt":"A long one.","size":"64x32","frames":108,"steps":400,"previews":false}' >/dev/null; idl=$(jget 'd["id"]' <"$tmp/sub.json")
submit '{"prompt":"Waits.","size":"64x32","frames":108,"steps":1,"previews":false}' >/dev/null; idq=$(jget 'd["id"]' <"$tmp/sub.json")
wait_status "$idl" in_progress 30
d=$(curl -s -X DELETE "$B/v1/videos/$idq")
check "DELETE a queued job: cancelled ($d)" '[ "$(status_of "$idq")" = failed ] && [ "$(curl -s "$B/v1/videos/$idq" | jget "d[\"error\"][\"code\"]")" = cancelled ]'
t0=$(date +%s.%N)
d=$(curl -s -X DELETE "$B/v1/videos/$idl")
wait_status "$idl" failed 30
t=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
check "DELETE a running job: cancelled at its next step (${t} s; $(curl -s "$B/v1/videos/$idl" | jget 'd["error"]'))" \
    '[ "$(curl -s "$B/v1/videos/$idl" | jget "d[\"error\"][\"code\"]")" = cancelled ] && [ ! -e "$tmp/d1/jobs/$idl/video.mp4" ]'
code=$(curl -s -o /dev/null -w '%{http_code}' "$B/v1/videos/$idl/content")
check "a cancelled job has no content (409: $code)" '[ "$code" = 409 ]'
d=$(curl -s -X DELETE "$B/v1/videos/$idr")
check "DELETE a finished job: deleted, 404 after, its folder gone ($d)" \
    '[ "$(jget "d[\"deleted\"]" <<<"$d")" = True ] && [ "$(curl -s -o /dev/null -w "%{http_code}" "$B/v1/videos/$idr")" = 404 ] && [ ! -e "$tmp/d1/jobs/$idr" ]'

section_done 3
# ---- 4. 50 jobs at once: all completed, in FIFO order, nothing lost (one prompt: the conditioning cache and
# --resident keep each job short, 32x32 the smallest canvas) ----
t0=$(date +%s)
seq 50 | xargs -P 8 -I{} curl -s -o "$tmp/q{}.json" -w '%{http_code}\n' -X POST "$B/v1/videos" -H "$J" \
    -d '{"prompt":"Fifty jobs.","size":"32x32","frames":108,"steps":1,"seed":{},"previews":false}' >"$tmp/codes50"
check "50 submissions: all 202 ($(sort "$tmp/codes50" | uniq -c | tr '\n' ' '))" '[ "$(grep -c "^202$" "$tmp/codes50")" = 50 ]'
ids50=$(cat "$tmp"/q*.json | "$PYTHON" -c 'import sys,json; [print(json.loads(l)["id"]) for l in sys.stdin.read().replace("}{","}\n{").splitlines()]' | sort -u)
for _ in $(seq 600); do
    n=$(curl -s "$B/healthz" | jget 'd["queued"]+d["in_progress"]'); [ "$n" = 0 ] && break; sleep 0.5
done
curl -s "$B/v1/videos?limit=1000&order=asc" >"$tmp/all.json"
done50=$("$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1]))["data"]; ids=set(sys.argv[2].split()); print(sum(1 for v in d if v["id"] in ids and v["status"]=="completed"))' "$tmp/all.json" "$ids50")
fifo=$("$PYTHON" -c 'import json,sys; d=[v for v in json.load(open(sys.argv[1]))["data"] if v["id"] in set(sys.argv[2].split())]; s=[v["started_at"] for v in d]; print(int(s==sorted(s)))' "$tmp/all.json" "$ids50")
check "50 jobs: 50 distinct ids, all completed, started in submission order ($done50 completed, $(( $(date +%s) - t0 )) s)" \
    '[ "$(wc -l <<<"$ids50")" = 50 ] && [ "$done50" = 50 ] && [ "$fifo" = 1 ]'
nmp4=$(ls "$tmp"/d1/jobs/*/video.mp4 | wc -l)
check "every completed job has its MP4 under --data ($nmp4 = 50 + the first four)" '[ "$nmp4" = 54 ]'
kill -TERM "$PID"; wait "$PID" 2>/dev/null
check "SIGTERM stops the server cleanly" 'grep -q "stopping" "$tmp/s1.log"'

section_done 4
# ---- 5. a full queue, kill -9 during a job, restart ----
start_server "$tmp/d2" "$tmp/s2.log" --queue 2
submit '{"prompt":"Runs long.","size":"64x32","frames":108,"steps":400,"previews":false}' >/dev/null; ida=$(jget 'd["id"]' <"$tmp/sub.json")
submit '{"prompt":"Queued.","size":"64x32","frames":108,"steps":1,"previews":false}' >/dev/null; idb=$(jget 'd["id"]' <"$tmp/sub.json")
code=$(submit '{"prompt":"One too many.","size":"64x32","frames":108,"steps":1}')
check "a full queue: 429 ($code: $(jget 'd["error"]["message"]' <"$tmp/sub.json"))" '[ "$code" = 429 ] && grep -q "queue is full" "$tmp/sub.json"'
wait_status "$ida" in_progress 30
for _ in $(seq 50); do grep -q "denoise" <<<"$(curl -s "$B/v1/videos/$ida")" && break; sleep 0.2; done
kill -9 "$PID"; wait "$PID" 2>/dev/null
start_server "$tmp/d2" "$tmp/s2b.log" --queue 2
check "after kill -9: the interrupted job is failed ($(curl -s "$B/v1/videos/$ida" | jget 'd["error"]'))" \
    '[ "$(curl -s "$B/v1/videos/$ida" | jget "d[\"status\"],d[\"error\"][\"code\"]")" = "failed interrupted" ]'
code=$(curl -s -o /dev/null -w '%{http_code}' "$B/v1/videos/$ida/content")
check "the interrupted job serves no file (409: $code) and no temporary is left" \
    '[ "$code" = 409 ] && [ -z "$(find "$tmp/d2/jobs/$ida" -name "*h3tmp*")" ] && [ ! -e "$tmp/d2/jobs/$ida/video.mp4" ]'
wait_status "$idb" completed 60
check "the queued job ran after the restart" '[ "$(status_of "$idb")" = completed ]'
kill -9 "$PID"; wait "$PID" 2>/dev/null
start_server "$tmp/d2" "$tmp/s2c.log" --queue 2
check "a second restart lists both jobs, the finished one served" \
    '[ "$(curl -s "$B/v1/videos" | jget "len(d[\"data\"])")" = 2 ] && [ "$(curl -s -o /dev/null -w "%{http_code}" "$B/v1/videos/$idb/content")" = 200 ]'
kill -9 "$PID"; wait "$PID" 2>/dev/null

section_done 5
# ---- 6. authentication ----
printf 'k3y-0123456789abcdef\n' >"$tmp/key"
start_server "$tmp/d3" "$tmp/s3.log" --api-key-file "$tmp/key"
check "with a key: healthz needs none" '[ "$(curl -s -o /dev/null -w "%{http_code}" "$B/healthz")" = 200 ]'
check "with a key: the page needs none" '[ "$(curl -s -o /dev/null -w "%{http_code}" "$B/")" = 200 ]'
err "no key" 401 'API key' "$B/v1/videos"
err "a wrong key" 401 'API key' -H 'Authorization: Bearer nope-nope-nope-nope' "$B/v1/videos"
err "no key on POST" 401 'API key' -X POST "$B/v1/videos" -H "$J" -d '{"prompt":"x"}'
err "no key on remix" 401 'API key' -X POST "$B/v1/videos/video_0123456789abcdef0123456789abcdef/remix" -H "$J" -d '{"seed":1}'
check "the right key" '[ "$(curl -s -o /dev/null -w "%{http_code}" -H "Authorization: Bearer k3y-0123456789abcdef" "$B/v1/videos")" = 200 ]'
ck=$(curl -s -D - -o /dev/null -X POST -H "Authorization: Bearer k3y-0123456789abcdef" "$B/v1/auth" | tr -d '\r' | sed -n 's/^Set-Cookie: //p')
check "POST /v1/auth sets an HttpOnly SameSite=Strict cookie ($ck)" 'grep -qE "^h3_session=[0-9a-f]{64}; Path=/; HttpOnly; SameSite=Strict$" <<<"$ck"'
check "the cookie authenticates" '[ "$(curl -s -o /dev/null -w "%{http_code}" -b "${ck%%;*}" "$B/v1/videos")" = 200 ]'
check "a wrong cookie does not" '[ "$(curl -s -o /dev/null -w "%{http_code}" -b "h3_session=00" "$B/v1/videos")" = 401 ]'
kill -9 "$PID"; wait "$PID" 2>/dev/null
out=$("$H3" serve -d "$TINY" --host 0.0.0.0 --port 0 --data "$tmp/d4" 2>&1); rc=$?
check "a non-loopback --host without a key is refused ($out)" '[ $rc = 2 ] && grep -q "not a loopback address: give --api-key-file" <<<"$out"'
out=$("$H3" serve -d "$TINY" --host localhost --data "$tmp/d4" 2>&1); rc=$?
check "a host name is refused (numeric only) ($out)" '[ $rc = 2 ] && grep -q "numeric IPv4 or IPv6" <<<"$out"'
out=$("$H3" serve -d "$TINY" --port 70000 2>&1); rc=$?
check "--port out of range ($out)" '[ $rc = 2 ] && grep -q "port expects an integer in 0..65535" <<<"$out"'
out=$("$H3" serve --port 0 2>&1); rc=$?
check "no -d: one line in the CLI's words ($out)" '[ $rc = 2 ] && [ "$out" = "h3: serve: -d SNAPSHOT_DIR is required" ]'
out=$("$H3" serve -d "$TINY" --backend gpu --port 0 --data "$tmp/d4" 2>&1); rc=$?
check "a bad engine flag ($out)" '[ $rc = 2 ] && grep -q "^h3: serve: --backend must be auto, cpu or cuda, got .gpu.$" <<<"$out"'
printf 'short\n' >"$tmp/short.key"
out=$("$H3" serve -d "$TINY" --api-key-file "$tmp/short.key" 2>&1); rc=$?
check "a short key is refused ($out)" '[ $rc = 2 ] && grep -q "at least 16 characters" <<<"$out"'

section_done 6
# ---- 7. the page in headless Chromium ----
chrome=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chrome" ]; then
    echo "(no chromium: the page test skipped)"
else
    cc -std=c11 -D_GNU_SOURCE -O1 -Wall -o "$tmp/serve_cdp" tests/cli/lib/serve_cdp.c -ljansson 2>"$tmp/cdp.cc"
    check "serve_cdp builds ($(head -2 "$tmp/cdp.cc"))" '[ -x "$tmp/serve_cdp" ]'
    start_server "$tmp/d5" "$tmp/s5.log" --api-key-file "$tmp/key"
    art=${H3_SERVE_ARTIFACTS:-out/test-artifacts} # the screenshot is kept as a test artifact (out/ is not tracked)
    mkdir -p "$art"
    out=$(timeout 180 "$tmp/serve_cdp" "$chrome" "$B/" "k3y-0123456789abcdef" "$art/serve_page.png" "$tmp/chrome" "$tmp/key.png" 2>&1); rc=$?
    echo "$out" | tail -6
    check "the page: key entered, prompt typed, keyframe set and submitted, the <video> loaded the clip ($(tail -1 <<<"$out"))" \
        '[ $rc = 0 ] && grep -q "^video loaded: 64x32" <<<"$out"'
    rerun=$(grep '^re-run: ' <<<"$out")
    check "the history's \"new seed\" ran the settings again with another seed ($rerun)" \
        'grep -qE "^re-run: \"A red fox runs through fresh snow. seed [0-9]+ \| A red fox runs through fresh snow. seed 7\"$" <<<"$rerun" && ! grep -q "seed 7 |" <<<"$rerun"'
    check "the history's \"new seed\" is a remix keeping the keyframe ($(grep '^remix: ' <<<"$out"))" \
        'grep -q "^remix: 1 input(s) kept, remixed from the first$" <<<"$out"'
    # the re-run's clip = h3 generate's with the keyframe and the re-run's seed
    AK=(-H "Authorization: Bearer k3y-0123456789abcdef")
    read -r pid2 pseed < <(curl -s "${AK[@]}" "$B/v1/videos?limit=1" | jget 'd["data"][0]["id"],d["data"][0]["settings"]["seed"]')
    curl -s "${AK[@]}" -o "$tmp/page2.mp4" "$B/v1/videos/$pid2/content"
    "$H3" generate -d "$TINY" -p "A red fox runs through fresh snow." --width 64 --height 32 --seconds 4.5 --steps 2 \
        --seed "$pseed" --first-frame "$tmp/key.png" -o "$tmp/page2_cli.mp4" 2>/dev/null
    check "the page's re-run MP4 = h3 generate with the keyframe and seed $pseed" 'cmp -s "$tmp/page2.mp4" "$tmp/page2_cli.mp4"'
    levels=$(ffmpeg -v error -i "$art/serve_page.png" -f rawvideo -pix_fmt gray - 2>/dev/null | od -An -v -tu1 | tr -s ' ' '\n' | sort -u | wc -l)
    check "the screenshot is not blank ($levels grey levels; $art/serve_page.png)" '[ "$levels" -ge 16 ]'
    sts=$(curl -s -H "Authorization: Bearer k3y-0123456789abcdef" "$B/v1/videos" | jget '" ".join(v["status"] for v in d["data"])')
    check "the page's two jobs completed on the server ($sts)" '[ "$sts" = "completed completed" ]'
    kill -9 "$PID"; wait "$PID" 2>/dev/null
fi
section_done 7
echo "serve.sh: $(( $(date +%s) - t_start )) s in all"
echo "RESULT $pass $fail"
