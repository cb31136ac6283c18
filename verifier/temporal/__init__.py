from .check import TemporalResult, analyse_program, analyse_timelines, check_temporal
