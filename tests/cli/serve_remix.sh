#!/usr/bin/env bash
# `h3 serve` (docs/serve.md), the remix endpoint, on the tiny snapshot (split from tests/cli/serve.sh, whose event and
# ETA checks wait on real time and run alone; these wait only for jobs to finish, so this script runs beside others):
#  POST /v1/videos/{id}/remix: an fl2va job (two base64 keyframes) and a ref2va job (an image and an audio
#     reference) remixed with a new seed = h3 generate with those inputs and that seed; the request's rules and messages on the overrides (400), no uploads, 404 for
#     an unknown id, a deleted job and a job whose uploads are gone, 405, 413, 415, 429; persisted across a restart
#     (the remix listed with remixed_from_video_id, its own copies of the uploads remixed again after the original
#     was deleted, the same bytes).
set -u
source "$(dirname "$0")/lib/common.bash" # H3, TINY, $tmp (removed at exit), pass/fail, ok, bad, check
source "$(dirname "$0")/lib/serve.bash" # the skips; start_server, jget, submit, status_of, wait_status, section_done, err
# the inputs serve.sh's first section makes: its clip (the served MP4 equals h3 generate's with these settings, checked
# there), a keyframe from it, and a body over --max-body
"$H3" generate -d "$TINY" -p "A red fox." --width 64 --height 32 --frames 108 --steps 2 --seed 7 -o "$tmp/v1.mp4" 2>/dev/null
ffmpeg -v error -i "$tmp/v1.mp4" -frames:v 1 "$tmp/key.png"
head -c 300000 /dev/zero | tr '\0' 'a' >"$tmp/big.txt"
check "the clip the remix jobs start from" '[ -s "$tmp/v1.mp4" ] && [ -s "$tmp/key.png" ]'

# ---- remix: a job again with overrides and its uploads ----
start_server "$tmp/d6" "$tmp/s6.log" --queue 2 --max-body 262144 --max-upload 65536
remix() { curl -s -o "$tmp/sub.json" -w '%{http_code}' -X POST "$B/v1/videos/$1/remix" -H "$J" -d "$2"; }
ffmpeg -v error -i "$tmp/v1.mp4" -vf 'select=eq(n\,100)' -frames:v 1 "$tmp/key2.png"
k1=$(base64 -w0 "$tmp/key.png"); k2=$(base64 -w0 "$tmp/key2.png")
code=$(submit "{\"prompt\":\"A fox turns.\",\"size\":\"64x32\",\"frames\":108,\"steps\":1,\"seed\":5,\"previews\":false,\"first_frame\":\"data:image/png;base64,$k1\",\"last_frame\":\"$k2\"}")
ido=$(jget 'd["id"]' <"$tmp/sub.json")
check "an fl2va job with two base64 keyframes: 202 ($code)" '[ "$code" = 202 ]'
code=$(remix "$ido" '{"seed":11}')
idm=$(jget 'd["id"]' <"$tmp/sub.json")
check "remix with a new seed: 202, a queued video object remixed from the original ($code $(head -c 300 "$tmp/sub.json"))" \
    '[ "$code" = 202 ] && [[ "$idm" =~ ^video_[0-9a-f]{32}$ ]] && [ "$idm" != "$ido" ] && [ "$(jget "d[\"remixed_from_video_id\"],d[\"settings\"][\"seed\"],d[\"settings\"][\"steps\"],d[\"size\"],d[\"frames\"]" <"$tmp/sub.json")" = "$ido 11 1 64x32 124" ]'
ins() { curl -s "$B/v1/videos/$1" | jget '" ".join("%s:%s:%s" % (i["role"], i["file"], i["bytes"]) for i in d["inputs"])'; }
check "the remix has the original's uploads ($(ins "$idm"))" \
    '[ "$(ins "$idm")" = "$(ins "$ido")" ] && [ "$(ins "$idm")" = "first_frame:input-0.png:$(stat -c %s "$tmp/key.png") last_frame:input-1.png:$(stat -c %s "$tmp/key2.png")" ] && cmp -s "$tmp/d6/jobs/$idm/input-0.png" "$tmp/key.png" && cmp -s "$tmp/d6/jobs/$idm/input-1.png" "$tmp/key2.png"'
check "GET /v1/videos/ID of a job that is not a remix: remixed_from_video_id null" '[ "$(curl -s "$B/v1/videos/$ido" | jget "d[\"remixed_from_video_id\"]")" = None ]'
wait_status "$ido" completed 60; wait_status "$idm" completed 60
curl -s -o "$tmp/vo.mp4" "$B/v1/videos/$ido/content"; curl -s -o "$tmp/vm.mp4" "$B/v1/videos/$idm/content"
"$H3" generate -d "$TINY" -p "A fox turns." --width 64 --height 32 --frames 108 --steps 1 --seed 11 \
    --first-frame "$tmp/key.png" --last-frame "$tmp/key2.png" -o "$tmp/cli_m.mp4" 2>/dev/null
check "the remix's MP4 = h3 generate with the same keyframes and seed 11 (and not the original's, seed 5)" \
    '[ -s "$tmp/cli_m.mp4" ] && cmp -s "$tmp/vm.mp4" "$tmp/cli_m.mp4" && ! cmp -s "$tmp/vm.mp4" "$tmp/vo.mp4"'
# a ref2va job (an image and an audio reference, base64) remixed: the same references (a video reference would
# cost minutes of encoding on 2 cores; its upload is stored and copied like these). The audio is the 2 s minimum:
# each of its seconds is 3,200 DiT rows on the tiny snapshot (its audio VAE encodes 10 samples at 32 kHz a latent).
ffmpeg -v error -f lavfi -i sine=frequency=440:sample_rate=8000 -t 2 -ac 1 "$tmp/ra.wav"
code=$(submit "{\"prompt\":\"Refs.\",\"size\":\"64x32\",\"frames\":108,\"steps\":1,\"previews\":false,\"ref_image_size\":\"match\",\"references\":[{\"kind\":\"image\",\"data\":\"$k1\"},{\"kind\":\"audio\",\"data\":\"$(base64 -w0 "$tmp/ra.wav")\"}]}")
idro=$(jget 'd["id"]' <"$tmp/sub.json")
code2=$(remix "$idro" '{"seed":21}'); idrm=$(jget 'd["id"]' <"$tmp/sub.json")
check "a ref2va job with an image and an audio reference remixed: 202 202 ($code $code2), the same references" \
    '[ "$code" = 202 ] && [ "$code2" = 202 ] && [ "$(ins "$idrm")" = "$(ins "$idro")" ] && cmp -s "$tmp/d6/jobs/$idrm/input-1.wav" "$tmp/ra.wav" && [ "$(curl -s "$B/v1/videos/$idrm" | jget "d[\"inputs\"][1][\"kind\"],d[\"inputs\"][1][\"file\"]")" = "audio input-1.wav" ]'
wait_status "$idro" completed 60; wait_status "$idrm" completed 60
curl -s -o "$tmp/vrm.mp4" "$B/v1/videos/$idrm/content"
"$H3" generate -d "$TINY" -p "Refs." --width 64 --height 32 --frames 108 --steps 1 --seed 21 --ref-image-size match \
    --ref-image "$tmp/key.png" --ref-audio "$tmp/ra.wav" -o "$tmp/cli_rm.mp4" 2>/dev/null
check "the ref2va remix's MP4 = h3 generate with the same references and seed 21" '[ -s "$tmp/cli_rm.mp4" ] && cmp -s "$tmp/vrm.mp4" "$tmp/cli_rm.mp4"'
# the overrides: the request's rules and messages (the same answer as POST /v1/videos gives)
same_as_post() { # NAME REMIX_BODY POST_BODY: the remix's 400 and message = POST's
    local name=$1 body=$2 pbody=$3
    local c1; c1=$(remix "$ido" "$body"); local m1; m1=$(jget 'd["error"]["message"]' <"$tmp/sub.json")
    local c2; c2=$(submit "$pbody"); local m2; m2=$(jget 'd["error"]["message"]' <"$tmp/sub.json")
    check "remix, $name: $c1 ($m1), as POST ($c2)" '[ "$c1" = 400 ] && [ "$c2" = 400 ] && [ -n "$m1" ] && [ "$m1" = "$m2" ]'
}
same_as_post "steps out of range" '{"steps":0}' '{"prompt":"x","steps":0}'
same_as_post "an unknown field" '{"colour":"red"}' '{"prompt":"x","colour":"red"}'
same_as_post "an empty prompt" '{"prompt":""}' '{"prompt":""}'
same_as_post "seed not a number" '{"seed":-1}' '{"prompt":"x","seed":-1}'
same_as_post "a canvas the CLI refuses" '{"size":"100x64"}' '{"prompt":"x","size":"100x64"}'
same_as_post "bad JSON" '{"seed": 1,' '{"seed": 1,'
same_as_post "not an object" '[1]' '[1]'
same_as_post "reuse with core_reuse" '{"reuse":2,"core_reuse":2}' '{"prompt":"x","size":"64x32","reuse":2,"core_reuse":2}'
V=(-X POST "$B/v1/videos/$ido/remix" -H "$J")
err "remix, steps out of range: the CLI's words" 400 "^steps expects an integer in 1..1000, got '0'" "${V[@]}" -d '{"steps":0}'
err "remix with an upload" 400 '^first_frame: a remix reuses the original video.s uploads' "${V[@]}" -d "{\"first_frame\":\"$k1\"}"
err "remix with references" 400 '^references: a remix reuses' "${V[@]}" -d '{"references":[]}'
err "remix, a multipart body" 415 'Content-Type must be application/json' -X POST "$B/v1/videos/$ido/remix" -F seed=3
err "remix of an unknown id" 404 '^no video with this id' -X POST "$B/v1/videos/video_0123456789abcdef0123456789abcdef/remix" -H "$J" -d '{"seed":1}'
err "GET on the remix path" 405 'method not allowed' "$B/v1/videos/$ido/remix"
err "a remix body over --max-body" 413 'larger than the limit of 262144 bytes' "${V[@]}" --data-binary @"$tmp/big.txt"
# a job whose uploads are gone from --data (404 with the file's name), then deleted (404)
submit "{\"prompt\":\"A fox.\",\"size\":\"64x32\",\"frames\":108,\"steps\":1,\"previews\":false,\"ref_image_size\":\"match\",\"references\":[{\"kind\":\"image\",\"data\":\"$k1\"}]}" >/dev/null
idr=$(jget 'd["id"]' <"$tmp/sub.json")
wait_status "$idr" completed 60
rm "$tmp/d6/jobs/$idr/input-0.png"
err "remix of a job whose uploads are gone" 404 "^$idr's upload input-0.png is gone from --data" -X POST "$B/v1/videos/$idr/remix" -H "$J" -d '{}'
curl -s -o /dev/null -X DELETE "$B/v1/videos/$idr"
err "remix of a deleted job" 404 '^no video with this id \(a deleted video cannot be remixed' -X POST "$B/v1/videos/$idr/remix" -H "$J" -d '{"seed":1}'
# the queue limit (--queue 2): a long job and a remix fill it, the next remix gets 429
submit '{"prompt":"Runs long.","size":"64x32","frames":108,"steps":400,"previews":false}' >/dev/null; idl=$(jget 'd["id"]' <"$tmp/sub.json")
code=$(remix "$ido" '{"seed":12}'); idq=$(jget 'd["id"]' <"$tmp/sub.json")
code2=$(remix "$ido" '{"seed":13}')
check "a full queue: the remix gets 429 ($code $code2: $(jget 'd["error"]["message"]' <"$tmp/sub.json"))" \
    '[ "$code" = 202 ] && [ "$code2" = 429 ] && grep -q "queue is full" "$tmp/sub.json"'
curl -s -o /dev/null -X DELETE "$B/v1/videos/$idq"; curl -s -o /dev/null -X DELETE "$B/v1/videos/$idl"
wait_status "$idl" failed 30
n6=$(curl -s "$B/v1/videos?limit=100" | jget 'len(d["data"])')
check "no refused remix left a job behind ($n6 = 6 jobs)" '[ "$n6" = 6 ]'
# persistence: a restart lists the remix with its origin; the original deleted, the remix's own uploads remain
kill -9 "$PID"; wait "$PID" 2>/dev/null
check "job.json keeps remixed_from_video_id" '"$PYTHON" -c "import json,sys; sys.exit(json.load(open(sys.argv[1]))[\"remixed_from_video_id\"] != sys.argv[2])" "$tmp/d6/jobs/$idm/job.json" "$ido"'
start_server "$tmp/d6" "$tmp/s6b.log" --queue 2 --max-body 262144 --max-upload 65536
check "after a restart: the remix listed, remixed_from_video_id kept, served" \
    '[ "$(curl -s "$B/v1/videos/$idm" | jget "d[\"status\"],d[\"remixed_from_video_id\"]")" = "completed $ido" ] && [ "$(curl -s -o /dev/null -w "%{http_code}" "$B/v1/videos/$idm/content")" = 200 ]'
d=$(curl -s -X DELETE "$B/v1/videos/$ido")
err "after a restart, remix of the deleted original" 404 '^no video with this id' -X POST "$B/v1/videos/$ido/remix" -H "$J" -d '{"seed":11}'
code=$(curl -s -o "$tmp/sub.json" -w '%{http_code}' -X POST "$B/v1/videos/$idm/remix")
idm2=$(jget 'd["id"]' <"$tmp/sub.json")
check "after a restart, a remix of the remix without a body: 202, the same settings ($code)" \
    '[ "$code" = 202 ] && [ "$(jget "d[\"remixed_from_video_id\"],d[\"settings\"][\"seed\"]" <"$tmp/sub.json")" = "$idm 11" ]'
wait_status "$idm2" completed 60
curl -s -o "$tmp/vm2.mp4" "$B/v1/videos/$idm2/content"
check "its MP4 = the first remix's (the uploads survived the restart and the original's deletion)" 'cmp -s "$tmp/vm2.mp4" "$tmp/cli_m.mp4"'
code=$(remix "$idm" '{"seconds":5,"size":"32x32","seed":3}'); idm3=$(jget 'd["id"]' <"$tmp/sub.json")
check "remix overrides replace the original's length and canvas ($code: $(jget 'd["settings"]' <"$tmp/sub.json"))" \
    '[ "$code" = 202 ] && [ "$(jget "d[\"size\"],d[\"frames\"],\"frames\" in d[\"settings\"]" <"$tmp/sub.json")" = "32x32 124 False" ]'
wait_status "$idm3" completed 60
curl -s -o "$tmp/vm3.mp4" "$B/v1/videos/$idm3/content"
"$H3" generate -d "$TINY" -p "A fox turns." --width 32 --height 32 --seconds 5 --steps 1 --seed 3 \
    --first-frame "$tmp/key.png" --last-frame "$tmp/key2.png" -o "$tmp/cli_m3.mp4" 2>/dev/null
check "that remix's MP4 = h3 generate with the overrides and the keyframes" '[ -s "$tmp/cli_m3.mp4" ] && cmp -s "$tmp/vm3.mp4" "$tmp/cli_m3.mp4"'
kill -9 "$PID"; wait "$PID" 2>/dev/null
section_done 8
echo "serve_remix.sh: $(( $(date +%s) - t_start )) s in all"
echo "RESULT $pass $fail"
