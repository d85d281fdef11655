"""Wrong: takes the last frame of the job's file, where it started, not where it waits."""

import re


def where_it_waits(dump: str, my_file: str) -> tuple[str, int]:
    mine = []
    for text in dump.splitlines():
        frame = re.match(r'^\s*File "(.+)", line (\d+) in (.+)$', text)
        if frame and frame[1] == my_file:
            mine.append((frame[3], int(frame[2])))
    return mine[-1]
