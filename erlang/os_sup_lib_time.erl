%%% @doc `os_sup_lib_time' holds the helper's clocks: monotonic
%%% milliseconds for deadlines and durations, and times and durations as
%%% people read them.
-module(os_sup_lib_time).

-import(os_sup_lib_text, [fmt/2]).

%% API
-export([now_ms/0, clock/1, secs/1]).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc Monotonic milliseconds, for deadlines and durations.
-spec now_ms() -> integer().
now_ms() ->
    erlang:monotonic_time(millisecond).

%% @doc UTC `HH:MM:SS.micro' of a system time in microseconds; `undefined' for anything else.
-spec clock(term()) -> binary() | undefined.
clock(Us) when is_integer(Us) ->
    {_, {H, M, Sec}} = calendar:system_time_to_universal_time(Us div 1000000, second),
    fmt("~2..0b:~2..0b:~2..0b.~6..0b", [H, M, Sec, Us rem 1000000]);
clock(_) ->
    undefined.

%% @doc `Ms' milliseconds in seconds with one decimal: `1.2 s'; under 50 ms `<0.1 s' (never a
%% `0.0 s' that reads as no time, as a trace that met its cap at once would say).
-spec secs(number()) -> binary().
secs(Ms) when Ms < 50 ->
    <<"<0.1 s">>;
secs(Ms) ->
    fmt("~.1f s", [Ms / 1000]).
