"""Train a small MLP on scikit-learn's bundled 8x8 digits (no download) with PyTorch, and
log its loss and accuracy to MLflow, as a user's own training script does."""

import argparse
import contextlib

import mlflow
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

try:  # optional: phases reported apart when mlflow-dlaas watches this script
    from mlflow_dlaas import phase
except ImportError:
    def phase(name):
        return contextlib.nullcontext()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    digits = load_digits()
    x_train, x_val, y_train, y_val = train_test_split(
        digits.data / 16.0, digits.target, test_size=0.25, random_state=args.seed)
    x_train, x_val = (torch.tensor(x, dtype=torch.float32) for x in (x_train, x_val))
    y_train, y_val = (torch.tensor(y) for y in (y_train, y_val))
    model = torch.nn.Sequential(torch.nn.Linear(64, args.hidden), torch.nn.ReLU(),
                                torch.nn.Linear(args.hidden, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.learning_rate, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

    with mlflow.start_run():
        for epoch in range(args.epochs):
            with phase("train"):
                model.train()
                order = torch.randperm(len(x_train))
                for start in range(0, len(order), args.batch_size):
                    batch = order[start:start + args.batch_size]
                    optimizer.zero_grad()
                    loss = loss_fn(model(x_train[batch]), y_train[batch])
                    loss.backward()
                    optimizer.step()
            with phase("evaluate"), torch.no_grad():
                model.eval()
                logits = model(x_val)
                val_loss = loss_fn(logits, y_val).item()
                val_accuracy = (logits.argmax(1) == y_val).float().mean().item()
            mlflow.log_metrics({"train_loss": loss.item(), "val_loss": val_loss,
                                "val_accuracy": val_accuracy}, step=epoch)
            print(f"epoch {epoch}: val_loss {val_loss:.4f}, val_accuracy {val_accuracy:.4f}")


if __name__ == "__main__":
    main()
