#!/bin/sh
# The five most frequent words of a file, case folded.
if [ -z "$1" ]; then
  echo "usage: top_words.sh FILE" >&2
  exit 2
fi
tr -cs 'A-Za-z' '\n' < "$1" | tr 'A-Z' 'a-z' | sort | uniq -c | sort -rn | head -5
