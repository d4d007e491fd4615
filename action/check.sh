#!/usr/bin/env bash
# The check step of abifit's GitHub Action (action.yml), which passes its inputs as variables:
#   ABIFIT_REQUIREMENTS   the lock or requirements files, separated by spaces or new lines
#   ABIFIT_TARGET_HOST    --host (a preset or a saved host profile), or empty
#   ABIFIT_TARGET_PYTHON  --python-version, or empty
#   ABIFIT_ASSUME_DRIVER  --assume-driver, or empty
#   ABIFIT_FAIL_ON        --fail-on
# Runs one `abifit check` that prints the report with GitHub annotations (one per broken module,
# on the line of the lock that pins its package) and writes SARIF and a Markdown summary; adds
# the summary to the job's ($GITHUB_STEP_SUMMARY) and gives the exit code and the SARIF file as
# step outputs ($GITHUB_OUTPUT). It exits 0 itself, so that the SARIF upload still runs: the
# action's last step ends the job with abifit's code.
set -uo pipefail

dir="${RUNNER_TEMP:-${TMPDIR:-/tmp}}"
sarif="$dir/abifit.sarif"
summary="$dir/abifit-summary.md"
args=(check --github --sarif "$sarif" --markdown "$summary" --fail-on "${ABIFIT_FAIL_ON:-degraded}")
for file in ${ABIFIT_REQUIREMENTS:-}; do
  args+=(-r "$file")
done
if [ -n "${ABIFIT_TARGET_HOST:-}" ]; then args+=(--host "$ABIFIT_TARGET_HOST"); fi
if [ -n "${ABIFIT_TARGET_PYTHON:-}" ]; then args+=(--python-version "$ABIFIT_TARGET_PYTHON"); fi
if [ -n "${ABIFIT_ASSUME_DRIVER:-}" ]; then args+=(--assume-driver "$ABIFIT_ASSUME_DRIVER"); fi

abifit "${args[@]}"
code=$?

if [ -s "$summary" ] && [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  cat "$summary" >>"$GITHUB_STEP_SUMMARY"
fi
if [ -n "${GITHUB_OUTPUT:-}" ]; then
  echo "exit-code=$code" >>"$GITHUB_OUTPUT"
  if [ -s "$sarif" ]; then echo "sarif-file=$sarif" >>"$GITHUB_OUTPUT"; fi
fi
exit 0
