// Server-sent events as the completion routes stream them, for the bench scripts: takes the
// text received so far, calls onData with each whole event's JSON (the `data: [DONE]` end and
// comments are passed over) and returns what is left for the next chunk.
export function takeEvents(buffered, onData) {
  let end;
  while ((end = buffered.indexOf('\n\n')) >= 0) {
    const event = buffered.slice(0, end);
    buffered = buffered.slice(end + 2);
    if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
    onData(JSON.parse(event.slice(6)));
  }
  return buffered;
}
