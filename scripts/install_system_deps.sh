#!/usr/bin/env bash
# The system packages rag_lab uses beyond pip (Debian/Ubuntu names), installed when missing:
#   tesseract-ocr, tesseract-ocr-eng, tesseract-ocr-chi-sim  OCR of scanned PDF pages (parser=pdf)
#   tesseract-ocr-osd                                        orientation detection: a scan or an
#                                                           image lying on its side is turned
#                                                           upright before OCR (ocr_orientation)
#   fonts-wqy-microhei, fonts-dejavu-core                   fonts of scripts/make_sample_documents.py;
#                                                           WenQuanYi is also the CJK font of plots
#                                                           (rag_lab/report/figures.py)
#   chromium                                                renders report.html in tests/report/
#                                                           test_chromium.py and MLflow's UI in
#                                                           tests/tracking/test_mlflow_ui.py
#                                                           (skipped without it)
#   postgresql                                              the backend of the MLflow tracking server
#                                                           `rag-lab tracking-server` starts
#                                                           (rag_lab/tracking/server.py; its test
#                                                           tests/tracking/test_postgres_server.py
#                                                           is skipped without it)
# Called by the README's set-up command and by .ci/run. As root it runs apt-get; with passwordless
# sudo it uses sudo; otherwise it prints the one command to run and exits 0 (pip set-up goes on;
# a scanned page then fails with the same hint, or parser.ocr=off skips such pages).
set -euo pipefail

need=()
if ! command -v tesseract >/dev/null 2>&1; then
  need+=(tesseract-ocr tesseract-ocr-eng tesseract-ocr-chi-sim tesseract-ocr-osd)
else
  langs="$(tesseract --list-langs 2>/dev/null || true)"
  grep -qx eng <<<"$langs" || need+=(tesseract-ocr-eng)
  grep -qx chi_sim <<<"$langs" || need+=(tesseract-ocr-chi-sim)
  grep -qx osd <<<"$langs" || need+=(tesseract-ocr-osd)
fi
[ -f /usr/share/fonts/truetype/wqy/wqy-microhei.ttc ] || need+=(fonts-wqy-microhei)
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need+=(fonts-dejavu-core)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# the server binaries (initdb, pg_ctl): Debian keeps them in /usr/lib/postgresql/<version>/bin
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || command -v initdb >/dev/null 2>&1 \
  || need+=(postgresql)

if [ "${#need[@]}" -eq 0 ]; then
  echo "system packages: all present"
  exit 0
fi
echo "system packages missing: ${need[*]}"
install=(apt-get install -y -qq --no-install-recommends "${need[@]}")
if ! command -v apt-get >/dev/null 2>&1; then
  echo "no apt-get here: install the equivalents of: ${need[*]}" >&2
  exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive "${install[@]}" >/dev/null
elif sudo -n true 2>/dev/null; then
  sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive "${install[@]}" >/dev/null
else
  echo "not root: run  sudo apt-get install ${need[*]}" >&2
  exit 0
fi
echo "system packages installed: ${need[*]}"
