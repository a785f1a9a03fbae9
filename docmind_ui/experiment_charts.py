"""Plotly figures of a threshold sweep: a heatmap over high x low for one gray-zone mode, and curves along
the high threshold at the live low one; the live thresholds are marked on both.  Points below the safety
floor are left blank on the heatmap and the floor is drawn on the curves: only the rest may be recommended."""

from __future__ import annotations

import plotly.graph_objects as go

from docmind_core.experiments.sweep import DEFAULT_FLOOR, Objective, SweepResult


def sweep_heatmap(result: SweepResult, mode: str, objective: Objective, floor: float = DEFAULT_FLOOR) -> go.Figure:
    points = [p for p in result.points if p.mode == mode]
    highs = sorted({p.high for p in points})
    lows = sorted({p.low for p in points})
    grid = [[None for _ in lows] for _ in highs]
    for p in points:
        if p.meets(floor):
            grid[highs.index(p.high)][lows.index(p.low)] = round(p.objective(objective), 4)
    fig = go.Figure(go.Heatmap(z=grid, x=lows, y=highs, colorscale="Viridis", colorbar={"title": objective},
                               hovertemplate="low %{x}<br>high %{y}<br>" + objective + " %{z}<extra></extra>"))
    live_high, live_low = result.live.high_threshold, result.live.low_threshold
    fig.add_trace(go.Scatter(x=[live_low], y=[live_high], mode="markers+text", text=["live"],
                             textposition="top center", marker={"symbol": "x", "size": 14, "color": "red"},
                             name="live thresholds"))
    best = result.recommend(objective, floor)
    if best is not None and best.mode == mode:
        fig.add_trace(go.Scatter(x=[best.low], y=[best.high], mode="markers+text", text=["recommended"],
                                 textposition="bottom center", marker={"symbol": "star", "size": 14,
                                                                       "color": "white"}, name="recommended"))
    fig.update_layout(xaxis_title="grader.low_threshold", yaxis_title="grader.high_threshold", height=420,
                      margin={"l": 10, "r": 10, "t": 30, "b": 10},
                      title=f"{objective} · {mode} · blank: not HIGH on unanswerable below {floor:.2f}")
    if highs and all(cell is None for row in grid for cell in row):
        # an all-blank heatmap autoscales its axes away from the grid and says nothing: keep the grid, say why
        xs, ys = [*lows, live_low], [*highs, live_high]
        fig.update_xaxes(range=[min(xs) - 0.025, max(xs) + 0.025])
        fig.update_yaxes(range=[min(ys) - 0.025, max(ys) + 0.025])
        fig.add_annotation(text=f"No point keeps unanswerable questions not HIGH in {floor:.0%} of their runs "
                                f"in {mode} mode", x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False)
    return fig


def sweep_curves(result: SweepResult, mode: str, floor: float = DEFAULT_FLOOR) -> go.Figure:
    live_low = result.live.low_threshold
    points = sorted((p for p in result.points if p.mode == mode and abs(p.low - live_low) < 1e-9),
                    key=lambda p: p.high)
    fig = go.Figure()
    for name, attr in (("precision of HIGH", "precision"), ("recall of HIGH", "recall"),
                       ("not HIGH on unanswerable", "unanswerable_not_high")):
        fig.add_trace(go.Scatter(x=[p.high for p in points], y=[getattr(p, attr) for p in points],
                                 mode="lines+markers", name=name))
    fig.add_vline(x=result.live.high_threshold, line_dash="dash", line_color="red",
                  annotation_text="live high")
    fig.add_hline(y=floor, line_dash="dot", line_color="grey", annotation_text=f"safety floor {floor:.2f}")
    fig.update_layout(xaxis_title=f"grader.high_threshold (low = {live_low})", yaxis_range=[0, 1.05], height=360,
                      margin={"l": 10, "r": 10, "t": 30, "b": 10})
    return fig
