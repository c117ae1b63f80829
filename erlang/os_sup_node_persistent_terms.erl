%%% @doc `os_sup_node_persistent_terms' lists the node's persistent terms
%%% largest first, for the tool `persistent_terms': each key and the memory
%%% its value takes, with the count and memory `persistent_term:info/0'
%%% gives for all of them.
%%%
%%% Persistent terms are read for free and written at a cost (a global GC
%%% when one is replaced or erased); a node whose persistent memory grows,
%%% or that replaces one often, shows it here by key. Only
%%% `persistent_term:get/0' (no copy) and `erts_debug:flat_size/1' are
%%% read; at most 100,000 terms are sized.
-module(os_sup_node_persistent_terms).

-include("os_sup_bounds.hrl").

-import(os_sup_lib_args, [arg_int/5, fmt_arg/1]).
-import(os_sup_lib_reply, [ok_reply/2]).
-import(os_sup_lib_text, [fmt/2, bytes/1]).

-export([persistent_terms/1]).

%% Terms sized at most (each sizing walks its value).
-define(MAX_SCAN, 100000).
%% A key as rendered, at most, in bytes.
-define(KEY_BYTES, 200).

%%%===================================================================
%%% API
%%%===================================================================

%% @doc The `limit' largest persistent terms: each key and its value's
%% bytes, with the count and memory of all of them.
-spec persistent_terms(os_sup_lib_args:args()) -> os_sup_lib_reply:reply().
persistent_terms(Args) ->
    Fmt = fmt_arg(Args),
    Limit = arg_int(limit, Args, ?PERSISTENT_TERMS_LIMIT_DEFAULT,
                    ?PERSISTENT_TERMS_LIMIT_MIN, ?PERSISTENT_TERMS_LIMIT_MAX),
    #{count := Count, memory := Memory} = persistent_term:info(),
    Words = erlang:system_info(wordsize),
    Sized = [{erts_debug:flat_size(V) * Words, K}
             || {K, V} <- lists:sublist(persistent_term:get(), ?MAX_SCAN)],
    Largest = lists:sublist(lists:reverse(lists:sort(Sized)), Limit),
    Terms = [#{key => os_sup_lib_render:term(K, Fmt, ?KEY_BYTES), bytes => B}
             || {B, K} <- Largest],
    Data = #{count => Count, memory => Memory, limit => Limit, terms => Terms},
    Head = fmt("~b persistent terms, ~ts; the ~b largest:",
               [Count, bytes(Memory), length(Terms)]),
    Rows = [fmt("  ~ts ~ts", [bytes(B), K]) || #{key := K, bytes := B} <- Terms],
    More = [fmt("  … ~b more of ~b", [Count - length(Terms), Count]) || Count > length(Terms)],
    ok_reply([Head | Rows ++ More], Data).
