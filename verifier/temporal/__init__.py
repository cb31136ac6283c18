"""Time: what each rank does in which order, and whether the ranks fit together.

``check_temporal(program)`` projects an IR program onto every rank of its mesh and checks
async handles and buffers, point-to-point matching, collective order within each process
group and deadlock freedom (rendezvous semantics).  ``pipeline`` generates GPipe, 1F1B
and interleaved 1F1B schedules and checks them, or any user-written schedule, with the
same machinery.
"""
from .check import TemporalResult, analyse_program, analyse_timelines, check_temporal
from .events import Event, Group, Projection, project
from .pipeline import (analyse_schedule, check_schedule, generate, gpipe, interleaved_1f1b, one_f_one_b,
                       with_communication)
from .schedule import Action, Schedule, ScheduleError, format_schedule, parse_schedule

__all__ = ["check_temporal", "analyse_program", "analyse_timelines", "TemporalResult", "project", "Projection",
           "Event", "Group", "analyse_schedule", "check_schedule", "generate", "gpipe", "one_f_one_b",
           "interleaved_1f1b", "with_communication", "Action", "Schedule", "ScheduleError", "parse_schedule",
           "format_schedule"]
