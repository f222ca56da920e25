"""Skill texts for the generated TextWorld games: the AgentOPSD teacher's privileged information.

Written here for the quest types of `arl.data.textworld_games` (the reference lab copies ALFWorld's
skill bank from ZethWang/AgentOPSD instead). Each is short and general: how to move, find, open,
unlock, take, place and eat, never a particular game's answer. A game gets the general skill and the
skill of every kind of command its quest needs (`skills_for`), so the teacher knows the kind of task
but not its steps. The student and every evaluation play without them.
"""

from __future__ import annotations

from collections.abc import Sequence

GENERAL = ("General: read the goal, split it into steps and do them in the order the goal gives. Each turn send "
           "exactly one command copied from the Commands list. After a command, read the answer: the list changes "
           "when you move or when something opens. Never repeat a command that did nothing.")
SKILLS = {
    "go": "Moving: the goal names directions (go east, go north). The room you need may be one or two moves away; "
          "a new room's name appears as -= Room =- in the answer.",
    "open": "Containers: a closed box, chest or locker must be opened before you can take from it or put into it: "
            "send open X first, then take Y from X.",
    "unlock": "Locks: a locked container needs its key. Take the key first (it may be inside another container), then "
              "unlock X with key, then open X.",
    "lock": "Locking: to lock a container, close it if the goal says so, then lock X with the key you carry.",
    "take": "Taking: take X when X is in the room, take X from Y when X is inside or on Y. You must hold an object to "
            "use, place or eat it.",
    "put": "Placing on: put X on Y needs X in your hands and Y in the same room; go back to Y's room if needed.",
    "insert": "Placing in: insert X into Y needs X in your hands and Y open and in the same room.",
    "drop": "Dropping: drop X leaves the object you hold in the current room; do it in the room the goal names.",
    "eat": "Eating: take the food first, then eat it.",
}
"""The skill of each kind of command (a walkthrough command's first word)."""


def skills_for(walkthrough: Sequence[str]) -> str:
    """The skill text of a game: the general skill, then one per kind of command its quest uses, in a
    fixed order (so the same kinds give the same text)."""
    kinds = {command.split()[0] for command in walkthrough if command.split()}
    return "\n".join([GENERAL, *(text for kind, text in SKILLS.items() if kind in kinds)])
