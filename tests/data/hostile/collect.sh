#!/bin/sh
# A program a hostile device string names (ssh=, adb=): running it leaves a marker.
echo ran > "${QC_MARKER:-qc-marker}"
